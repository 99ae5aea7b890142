"""The catch environment over the wire: a real uvicorn server, the real client."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from envs.catch import server as catch_server
from envs.catch.client import open_catch_env
from envs.catch.models import CatchAction, CatchObservation, CatchState
from envs.catch.server import BuiltinCatch, CatchEnvironment, new_game, render_board
from tests.envs.servers import run_env_server
from tests.envs.wire import (
    NOT_STARTED_ERROR,
    SERVER_ENV,
    assert_bundled_routes,
    assert_openenv_validate_passes,
    assert_session_refused,
    over_error,
    refused_then_stepped,
    server_error,
    two_session_server,
)

APP = "envs.catch.server:app"
LEGEND = "o = ball, P = your paddle, . = empty. The ball falls one row per move."
EMPTY_ROW = ". . . . ."






def ball_column(observation: CatchObservation) -> int:
    """The ball's column as a model would find it: the 'o' in the grid (or under 'P')."""
    for line in observation.board:
        cells = line.split(" ")
        if "o" in cells:
            return cells.index("o")
    raise AssertionError("no ball on the board")


def paddle_column(observation: CatchObservation) -> int:
    return observation.board[-1].split(" ").index("P")


def toward(target: int, paddle: int) -> str:
    return "left" if target < paddle else "right" if target > paddle else "stay"


@pytest.fixture(scope="module")
def catch_url() -> Iterator[str]:
    with run_env_server(APP, {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "8"}) as url:
        yield url


# --- in-process units -------------------------------------------------------------


def test_new_game_is_seeded() -> None:
    columns = [new_game(seed).ball_column for seed in range(40)]
    assert columns == [new_game(seed).ball_column for seed in range(40)]
    assert set(columns) == {0, 1, 2, 3, 4}
    assert new_game(3).ball_column == random.Random(3).choice(range(5))
    game = new_game(3)
    assert (game.ball_row, game.paddle_column, game.is_terminal(), game.returns()) == (
        0,
        2,
        False,
        0.0,
    )


def test_builtin_rules_clamp_the_paddle_and_score_the_landing() -> None:
    game = BuiltinCatch(10, 5, random.Random(0))
    game.ball_column = 0
    for _ in range(8):
        game.apply(0)  # LEFT, held against the wall
    assert (game.ball_row, game.paddle_column, game.is_terminal(), game.returns()) == (
        8,
        0,
        False,
        0.0,
    )
    game.apply(2)  # RIGHT, off the ball's column on the last move
    assert (game.ball_row, game.paddle_column, game.is_terminal(), game.returns()) == (
        9,
        1,
        True,
        -1.0,
    )


def test_builtin_matches_open_spiel() -> None:
    pyspiel = pytest.importorskip("pyspiel")
    rng = random.Random(1)
    for seed in range(20):
        ours = BuiltinCatch(10, 5, random.Random(seed))
        theirs = catch_server.SpielCatch(10, 5, random.Random(seed))
        assert pyspiel is catch_server.pyspiel
        while not ours.is_terminal():
            positions = (ours.ball_row, ours.ball_column, ours.paddle_column)
            assert positions == (theirs.ball_row, theirs.ball_column, theirs.paddle_column)
            action = rng.choice([0, 1, 2])
            ours.apply(action)
            theirs.apply(action)
        assert theirs.is_terminal() is True
        assert ours.returns() == theirs.returns()


def test_render_board_draws_the_paddle_over_a_caught_ball() -> None:
    game = BuiltinCatch(10, 5, random.Random(0))
    game.ball_row, game.ball_column, game.paddle_column = 9, 2, 2
    assert render_board(game) == [EMPTY_ROW] * 9 + [". . P . ."]
    game.ball_column = 4
    assert render_board(game) == [EMPTY_ROW] * 9 + [". . P . o"]


def test_reset_rejects_a_bad_seed() -> None:
    env = CatchEnvironment()
    with pytest.raises(ValueError, match=r"^seed must be an integer, got '7'$"):
        env.reset(seed="7")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^seed must be an integer, got True$"):
        env.reset(seed=True)


# --- over the wire ----------------------------------------------------------------


def test_http_routes(catch_url: str) -> None:
    description, schema = assert_bundled_routes(
        catch_url, "catch", action="CatchAction", required=["direction"],
        observation=["text", "board", "ball_row", "ball_column", "paddle_column", "rows_left", "outcome"],
    )
    assert description == (
        "OpenSpiel's catch on a 10x5 grid: move the paddle left, stay or right while "
        "the ball falls; +1 for a catch, -1 for a miss after 9 moves. reset takes a "
        f"seed (engine: {catch_server.ENGINE})."
    )
    assert schema["action"]["properties"]["direction"]["enum"] == ["left", "stay", "right"]


def test_reset_shows_the_grid(catch_url: str) -> None:
    with open_catch_env(catch_url) as env:
        result = env.reset(seed=3)
        observation = result.observation
        episode_id = observation.metadata["episode_id"]
        column = random.Random(3).choice(range(5))
        top = ["."] * 5
        top[column] = "o"
        board = [" ".join(top)] + [EMPTY_ROW] * 8 + [". . P . ."]
        assert (result.reward, result.done) == (None, False)
        assert observation.board == board
        assert observation.text == "\n".join(
            [*board, LEGEND, "Rows left: 9. Move left or right, or stay."]
        )
        assert (observation.ball_row, observation.ball_column) == (0, column)
        assert (observation.paddle_column, observation.rows_left) == (2, 9)
        assert observation.outcome is None
        assert observation.metadata == {
            "episode_id": episode_id,
            "step_count": 0,
            "max_steps": 9,
        }
        assert env.state() == CatchState(
            episode_id=episode_id,
            step_count=0,
            seed=3,
            ball_row=0,
            ball_column=column,
            paddle_column=2,
        )


def test_same_seed_same_episode(catch_url: str) -> None:
    moves = ["left", "left", "stay", "right", "stay", "left", "right", "right", "stay"]
    with open_catch_env(catch_url) as a, open_catch_env(catch_url) as b:
        first = [a.reset(seed=11)] + [a.step(CatchAction(direction=m)) for m in moves]
        second = [b.reset(seed=11)] + [b.step(CatchAction(direction=m)) for m in moves]
        assert [r.observation.text for r in first] == [r.observation.text for r in second]
        assert [r.reward for r in first] == [r.reward for r in second]
        ids = {r.observation.metadata["episode_id"] for r in (first[0], second[0])}
        assert len(ids) == 2
        columns = {a.reset(seed=seed).observation.ball_column for seed in range(12)}
        assert len(columns) > 1  # different seeds start the ball in different columns


@pytest.mark.parametrize("seed", [0, 1, 5])
def test_steering_under_the_ball_wins(catch_url: str, seed: int) -> None:
    with open_catch_env(catch_url) as env:
        result = env.reset(seed=seed)
        episode_id = result.observation.metadata["episode_id"]
        rewards = []
        for step in range(1, 10):
            observation = result.observation
            direction = toward(ball_column(observation), paddle_column(observation))
            result = env.step(CatchAction(direction=direction))
            rewards.append(result.reward)
            assert result.observation.metadata == {
                "episode_id": episode_id,
                "step_count": step,
                "max_steps": 9,
            }
            assert result.done is (step == 9)
        assert rewards == [0.0] * 8 + [1.0]
        observation = result.observation
        assert observation.outcome == "caught"
        assert observation.rows_left == 0
        assert observation.ball_column == observation.paddle_column
        assert observation.text.splitlines()[-2:] == [LEGEND, "Caught the ball! Reward +1."]
        assert observation.board[-1].count("P") == 1 and "o" not in "".join(observation.board)
        state = env.state()
        assert (state.done, state.outcome, state.step_count, state.ball_row) == (
            True,
            "caught",
            9,
            9,
        )

        assert server_error(lambda: env.step(CatchAction(direction="stay"))) == over_error(episode_id)
        assert env.state().step_count == 9


def test_steering_away_loses(catch_url: str) -> None:
    with open_catch_env(catch_url) as env:
        result = env.reset(seed=2)
        for _ in range(9):
            observation = result.observation
            away = "left" if ball_column(observation) >= 2 else "right"
            result = env.step(CatchAction(direction=away))
        observation = result.observation
        assert (result.reward, result.done, observation.outcome) == (-1.0, True, "missed")
        assert observation.ball_column != observation.paddle_column
        assert observation.text.splitlines()[-1] == "Missed the ball. Reward -1."
        assert observation.board[-1].split(" ")[observation.ball_column] == "o"
        assert observation.metadata["step_count"] == 9


def test_step_before_reset_is_an_error(catch_url: str) -> None:
    with open_catch_env(catch_url) as env:
        assert server_error(lambda: env.step(CatchAction(direction="left"))) == NOT_STARTED_ERROR


def test_bad_seed_over_the_wire(catch_url: str) -> None:
    with open_catch_env(catch_url) as env:
        assert server_error(lambda: env.reset(seed="abc")) == (
            "Server error: seed must be an integer, got 'abc' (code: EXECUTION_ERROR)"
        )


def test_unknown_direction_is_refused_before_the_step(catch_url: str) -> None:
    first, error, stepped = refused_then_stepped(
        catch_url, {"seed": 4}, {"direction": "up"}, {"direction": "stay"}
    )
    assert first["type"] == "observation"
    assert error["type"] == "error"
    assert error["data"]["code"] == "VALIDATION_ERROR"
    assert error["data"]["errors"][0]["type"] == "literal_error"
    reply = stepped["data"]
    assert reply["observation"]["metadata"]["step_count"] == 1
    assert reply["metadata"]["step_count"] == 1
    assert reply["reward"] == 0.0


def test_capacity_reached() -> None:
    with two_session_server("envs.catch.server") as url:
        with open_catch_env(url) as a, open_catch_env(url) as b:
            a.reset(seed=1)
            b.reset(seed=2)
            assert_session_refused(open_catch_env(url))
            assert a.step(CatchAction(direction="stay")).observation.metadata["step_count"] == 1


def test_openenv_validate(catch_url: str, tmp_path: Path) -> None:
    assert_openenv_validate_passes(catch_url, tmp_path)
