"""Reward terms on real episodes of the bundled environments (real uvicorn servers, the
adapters the worker binds), through the compiled TRL reward functions, with exact values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from envs.adapters import adapter_class
from envs.adapters.attributes import ATTRIBUTES, episode_attributes
from envs.sudoku.server import generate_puzzle
from envs.wordle.rules import score_guess
from envs.wordle.server import WORDS, secret_for_seed
from tests.envs.servers import run_env_server
from webapp.rewards.terms import RewardTerm
from worker.training.rewards import compile_rewards

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "OPENENV_MODE": "simulation"}
SEED = 31

# The guide's Wordle recipe.
WORDLE = [
    RewardTerm.model_validate(t)
    for t in [
        {"name": "win", "kind": "success_bonus", "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": "max_guesses"}},
        {"name": "greens", "kind": "partial_credit", "params": {"attribute": "best_greens", "scale": 0.1}},
        {"name": "invalid", "kind": "penalty", "params": {"attribute": "invalid_moves", "scale": 0.1}},
        {"name": "guessed", "kind": "tool_use", "params": {"tool": "guess"}},
        {"name": "formula", "kind": "expression", "params": {"expression": "num_guesses + 10 * calls_guess + meta_greens / 10"}},
    ]
]  # fmt: skip


def score(terms: list[RewardTerm], adapter: Any) -> tuple[list[float | None], float]:
    funcs, weights = compile_rewards(terms)
    values = [func(environments=[adapter])[0] for func in funcs]
    return values, sum(w * v for w, v in zip(weights, values, strict=True) if v is not None)


def greens(word: str, secret: str) -> int:
    return score_guess(word, secret).count("G")


@pytest.fixture(scope="module")
def wordle() -> Iterator[Any]:
    with run_env_server(
        "envs.wordle.server:app", {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "4"}
    ) as url:
        adapter = adapter_class(metadata_name="wordle", base_url=url, env_name="wordle")()
        yield adapter
        adapter._close()


def test_wordle_win_in_one_guess(wordle):
    wordle.reset(seed=SEED)
    secret = secret_for_seed(SEED)
    wordle.guess(guess=secret)
    values, total = score(WORDLE, wordle)
    assert values == pytest.approx([1 + 0.5 * 5 / 6, 0.0, -0.0, 1.0, 1 + 10 + 0.5])
    assert round(values[0] + values[1] + values[2], 4) == 1.4167
    assert total == pytest.approx(1 + 0.5 * 5 / 6 + 1.0 + 11.5)


def test_wordle_win_in_six_guesses(wordle):
    wordle.reset(seed=SEED)
    secret = secret_for_seed(SEED)
    for word in [w for w in WORDS if w != secret][:5]:
        wordle.guess(guess=word)
    wordle.guess(guess=secret)
    values, _ = score(WORDLE[:3], wordle)
    assert values == pytest.approx([1.0, 0.0, -0.0])
    assert episode_attributes(wordle)["num_guesses"] == 6.0


def test_wordle_loss_with_three_greens(wordle):
    secret = secret_for_seed(SEED)
    three = next(w for w in WORDS if greens(w, secret) == 3)
    others = [w for w in WORDS if w not in (secret, three) and greens(w, secret) < 3][:5]
    wordle.reset(seed=SEED)
    for word in [three, *others]:
        wordle.guess(guess=word)
    assert (wordle.done, wordle.won, wordle.best_greens) == (True, False, 3)
    values, total = score(WORDLE[:3], wordle)
    assert values == pytest.approx([0.0, 0.3, -0.0])
    assert total == pytest.approx(0.3)


def test_wordle_two_invalid_moves(wordle):
    wordle.reset(seed=SEED)
    secret = secret_for_seed(SEED)
    wordle.guess(guess="zzzzz")
    wordle.guess(guess="qqqqq")
    values, _ = score(WORDLE, wordle)
    assert values[2] == pytest.approx(-0.2)
    assert values[3] == 1.0  # the calls were well-formed (refused guesses, not failed calls)
    attributes = episode_attributes(wordle)
    assert (
        attributes["invalid_moves"],
        attributes["calls_guess"],
        attributes["failures_guess"],
    ) == (2.0, 2.0, 0.0)
    assert (attributes["won"], attributes["num_guesses"], attributes["max_guesses"]) == (
        0.0,
        0.0,
        6.0,
    )
    assert secret not in ("zzzzz", "qqqqq")
    wordle.reset(seed=SEED)  # a new episode counts afresh
    assert "calls_guess" not in episode_attributes(wordle)


def test_every_listed_wordle_attribute_is_there_after_a_step(wordle):
    wordle.reset(seed=SEED)
    wordle.guess(guess=next(w for w in WORDS if w != secret_for_seed(SEED)))
    listed = {name for name, _ in ATTRIBUTES["wordle"] if "<" not in name}
    assert listed - set(episode_attributes(wordle)) == set()


@pytest.fixture(scope="module")
def catch_and_sudoku() -> Iterator[tuple[Any, Any]]:
    with (
        run_env_server("envs.catch.server:app", SERVER_ENV) as catch_url,
        run_env_server("envs.sudoku.server:app", SERVER_ENV) as sudoku_url,
    ):
        catch = adapter_class(metadata_name="catch", base_url=catch_url, env_name="catch")()
        sudoku = adapter_class(metadata_name="sudoku", base_url=sudoku_url, env_name="sudoku")()
        yield catch, sudoku
        catch._close()
        sudoku._close()


def test_catch_terms(catch_and_sudoku):
    from envs.catch.solver import CatchSolver

    catch, _ = catch_and_sudoku
    solver = CatchSolver()
    text = catch.reset(seed=0)
    solver.start(text, {})
    call = solver.next_call(None)
    while call is not None:
        text = getattr(catch, call.name)(**call.arguments)
        call = solver.next_call(text)
    terms = [
        RewardTerm.model_validate(t)
        for t in [
            {"name": "caught", "kind": "expression", "params": {"expression": "catches"}},
            {"name": "win", "kind": "success_bonus"},
            {"name": "env", "kind": "env_reward", "params": {"aggregate": "sum"}},
            {"name": "outcome", "kind": "outcome"},
            {"name": "moves", "kind": "penalty", "params": {"attribute": "steps", "scale": 0.01}},
        ]
    ]
    values, _ = score(terms, catch)
    assert values == pytest.approx([1.0, 1.0, 1.0, 1.0, -0.09])


def test_sudoku_terms_partial_then_solved(catch_and_sudoku):
    _, sudoku = catch_and_sudoku
    puzzle, solution = generate_puzzle(30, 2)
    blanks = [(r, c) for r in range(9) for c in range(9) if puzzle[r][c] == 0]
    given = next((r, c) for r in range(9) for c in range(9) if puzzle[r][c])
    terms = [
        RewardTerm.model_validate(t)
        for t in [
            {"name": "cells", "kind": "partial_credit", "params": {"attribute": "progress"}},
            {"name": "invalid", "kind": "penalty", "params": {"attribute": "invalid_moves", "scale": 0.1}},
            {"name": "solved", "kind": "gate", "params": {"threshold": 1.0}, "terms": [{"name": "env", "kind": "env_reward"}]},
            {"name": "share", "kind": "expression", "params": {"expression": "cells_filled / blanks"}},
        ]
    ]  # fmt: skip
    sudoku.reset(seed=30, blanks=2)
    sudoku.place(given[0] + 1, given[1] + 1, 5)
    (r, c) = blanks[0]
    sudoku.place(r + 1, c + 1, solution[r][c])
    values, _ = score(terms, sudoku)
    assert values == pytest.approx([0.5, -0.1, 0.0, 0.5, 0.5])  # the gate's child: env 0.5
    (r, c) = blanks[1]
    sudoku.place(r + 1, c + 1, solution[r][c])
    values, _ = score(terms, sudoku)
    assert values == pytest.approx([0.0, -0.1, 1.0, 1.0, 1.0])
