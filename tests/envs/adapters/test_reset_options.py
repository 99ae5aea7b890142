"""Reset options and episode rewards on OpenEnv servers written elsewhere (classic and MCP),
through the adapters the worker generates for them (tests/support/option_servers.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from envs.adapters.attributes import episode_attributes
from envs.adapters.base import OpenEnvAdapter, ResetRefused
from envs.adapters.generic import adapter_class_for_server, classic_adapter_class, error_details
from envs.rows import reset_options
from tests.envs.servers import run_env_server

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false"}
ROW = {"prompt": [{"role": "user", "content": "Answer."}], "env": "quiz", "target": None, "seed": 3}


@pytest.fixture(scope="module", params=["classic_app", "mcp_app"])
def quiz(request: pytest.FixtureRequest) -> Iterator[tuple[str, type[OpenEnvAdapter]]]:
    """(style, adapter class) for each kind of server."""
    with run_env_server(f"tests.support.option_servers:{request.param}", SERVER_ENV) as url:
        yield request.param, adapter_class_for_server(base_url=url, env_name="quiz")



def _play(adapter: Any, style: str) -> None:
    for _ in range(2):
        if style == "mcp_app":
            adapter.answer(text="four")
        else:
            adapter.echo(message="four")


def test_reset_options_reach_the_server(quiz: tuple[str, type], opened: Callable[..., Any]) -> None:
    _style, cls = quiz
    adapter = opened(cls)
    rest = ""
    assert adapter.reset(**ROW) == f"\nquestion: legs question 3 of 10{rest}"  # the server's defaults
    row = {**ROW, "topic": "arithmetic", "size": 20, "seed": 25}
    assert adapter.reset(**row) == f"\nquestion: arithmetic question 5 of 20{rest}"


def test_an_option_the_server_refuses_fails_the_reset_with_its_words(
    quiz: tuple[str, type], opened: Callable[..., Any]
) -> None:
    _style, cls = quiz
    with pytest.raises(ResetRefused) as refused:
        opened(cls).reset(**ROW, topic="chess")
    assert str(refused.value) == (
        "environment 'quiz' refused the reset (seed=3, topic='chess'): unknown topic 'chess': "
        "this server knows legs, arithmetic (code: EXECUTION_ERROR)"
    )


def test_a_validation_error_keeps_its_detail(quiz: tuple[str, type], opened: Callable[..., Any]) -> None:
    _style, cls = quiz
    with pytest.raises(ResetRefused) as refused:
        opened(cls).reset(**ROW, broken=True)
    assert str(refused.value) == (
        "environment 'quiz' refused the reset (seed=3, broken=True): Invalid message: "
        "ground_truth: Input should be a valid string (code: VALIDATION_ERROR)"
    )


def test_penalties_make_a_negative_episode_reward(quiz: tuple[str, type], opened: Callable[..., Any]) -> None:
    style, cls = quiz
    adapter = opened(cls)
    adapter.reset(**ROW, step_reward=-1.0)
    _play(adapter, style)
    assert (adapter.reward, adapter.done, adapter.rewards) == (-2.0, True, [-1.0, -1.0])
    attributes = episode_attributes(adapter)
    assert {k: attributes[k] for k in ("reward", "reward_sum", "reward_last", "reward_max")} == {
        "reward": -2.0, "reward_sum": -2.0, "reward_last": -1.0, "reward_max": -1.0,
    }
    # A new episode on the same instance starts from nothing.
    adapter.reset(**ROW, step_reward=0.5)
    _play(adapter, style)
    assert adapter.reward == 1.0


def test_only_envlab_columns_and_missing_values_stay_behind() -> None:
    row = {"prompt": "p", "env": "a", "environment": "a", "target": "t", "task_index": 0, "seed": 1,
           "size": 20, "topic": None, "fen": "8/8/8/8/8/8/8/8 w - - 0 1"}
    assert reset_options(row) == {"seed": 1, "size": 20, "fen": "8/8/8/8/8/8/8/8 w - - 0 1"}


def test_error_details_are_one_bounded_line() -> None:
    errors = [{"loc": ["ground_truth"], "msg": "Input should be a valid string"}] * 12
    text = error_details(errors)
    assert text.startswith("ground_truth: Input should be a valid string; ground_truth: ")
    assert text.endswith("; and 2 more")
    assert text.count("ground_truth") == 10
    assert error_details("not a list") == ""


@pytest.mark.parametrize(
    ("action", "metadata", "summary"),
    [
        ("Answer the quiz question.", "Answers quiz questions.", "Answer the quiz question. Answers quiz questions."),
        # openenv's default /metadata description says nothing.
        ("Action for Connect4 environment.", "Connect4Environment environment", "Action for Connect4 environment."),
        ("Play chess. Moves are UCI strings.", "Moves are UCI strings.", "Play chess. Moves are UCI strings."),
        ("Play chess.", "Play chess against Stockfish.", "Play chess against Stockfish."),
        ("Play chess.", "", "Play chess."),
    ],
)
def test_a_generated_tool_says_the_servers_description_once(action: str, metadata: str, summary: str) -> None:
    schema = {"title": "MoveAction", "description": action, "type": "object",
              "properties": {"move": {"type": "string"}}, "required": ["move"]}
    cls = classic_adapter_class(base_url="http://127.0.0.1:9", env_name="x", schema=schema, description=metadata)
    assert cls.move.__doc__.splitlines()[0] == summary


def test_a_run_that_failed_on_a_refused_reset_says_so_without_a_class_path() -> None:
    from worker.training.lifecycle import error_message

    refused = ResetRefused("environment 'rg' refused the reset (seed=1, size=0): size must be positive")
    assert error_message(refused) == "environment 'rg' refused the reset (seed=1, size=0): size must be positive"
    assert error_message(ValueError("bad")) == "ValueError: bad"  # others keep their type
