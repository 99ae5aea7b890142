"""The multi-environment router and lost-episode handling, against real environment servers."""

from __future__ import annotations

import pytest

from envs.adapters import adapter_class
from envs.adapters.base import EnvironmentAtCapacity, EpisodeLost
from envs.adapters.router import ToolConflict, router_class
from tests.envs.servers import free_port, run_env_server
from tests.factories import RunFactory
from webapp.runs.config import RewardTerm, parse_run_config
from webapp.runs.models import Rollout, RunEvent
from webapp.runs.services import run_claim
from webapp.runs.telemetry.record import telemetry_record
from worker.datasets import episode_rows
from worker.training.rewards import compile_term

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false"}


@pytest.fixture(scope="module")
def wordle_url():
    with run_env_server("envs.wordle.server:app", SERVER_ENV) as url:
        yield url


def _router(echo_url, wordle_url):
    return router_class(
        {
            "echo": adapter_class(metadata_name="echo", base_url=echo_url, env_name="echo"),
            "wordle": adapter_class(metadata_name="wordle", base_url=wordle_url, env_name="wordle"),
        }
    )


def test_router_routes_by_env_and_refuses_other_tools(echo_url, wordle_url):
    from transformers.utils import get_json_schema

    Router = _router(echo_url, wordle_url)
    assert {
        name: get_json_schema(getattr(Router, name))["function"]["parameters"]["properties"]
        for name in ("echo", "guess")
    } == {
        "echo": {"message": {"type": "string", "description": "The message to echo back."}},
        "guess": {
            "guess": {
                "type": "string",
                "description": 'A five-letter English word, for example "crane".',
            }
        },
    }
    router = Router()
    assert router.reset(env="echo", target="hello", seed=1) is None
    assert router.env_name == "echo"
    with pytest.raises(ValueError) as refused:
        router.guess(guess="crane")
    assert str(refused.value) == (
        "Tool 'guess' belongs to wordle; this episode is in 'echo', whose tools are: echo."
    )
    assert router.echo(message="hello") == "hello"
    assert (router.reward, router.done, router.lost, router.tool_calls) == (1.0, True, False, 1)

    intro = router.reset(env="wordle", seed=7, target=None)
    assert intro.startswith("\n") and router.env_name == "wordle"
    assert router._instances["echo"]._client is None  # the idle echo session was given back
    out = router.guess(guess="zzzzz")
    assert "not in the word list" in out and router.invalid_moves == 1 and router.num_guesses == 0
    with pytest.raises(ValueError, match="this episode is in 'wordle'"):
        router.echo(message="hi")


def test_per_environment_terms_return_none_elsewhere(echo_url, wordle_url):
    router = _router(echo_url, wordle_url)()
    echo_only = compile_term(
        RewardTerm(name="echo_reward", kind="env_reward", environments=["echo"])
    )
    wordle_only = compile_term(
        RewardTerm(name="wordle_reward", kind="env_reward", environments=["wordle"])
    )
    router.reset(env="echo", target="hi")
    router.echo(message="hi")
    assert (echo_only(environments=[router]), wordle_only(environments=[router])) == ([1.0], [None])


def test_tool_clash_is_refused():
    class A:
        def reset(self, **row): ...

        def play(self, move: str) -> str:
            """Play.

            Args:
                move: the move
            """
            return move

    class B:
        def reset(self, **row): ...

        def play(self, move: int) -> str:
            """Play.

            Args:
                move: the move
            """
            return str(move)

    with pytest.raises(ToolConflict, match="environments 'a' and 'b' both have a tool 'play'"):
        router_class({"a": A, "b": B})


def test_rows_carry_env_seed_and_reset_arguments():
    config = parse_run_config(
        {
            "name": "mix",
            "model": "demo:echo",
            "grpo": {"seed": 3},
            "environments": [
                {"environment": 1, "name": "echo", "prompt": "Echo '{phrase}'.", "rows": 2},
                {
                    "environment": 2,
                    "name": "sudoku",
                    "prompt": "Solve it.",
                    "rows": 3,
                    "reset": {"blanks": 5},
                },
            ],
        }
    )
    rows = episode_rows(config)
    assert sorted(r["env"] for r in rows) == ["echo", "echo", "sudoku", "sudoku", "sudoku"]
    assert all(set(r) == {"prompt", "env", "target", "seed", "blanks"} for r in rows)
    assert [r["blanks"] for r in rows if r["env"] == "sudoku"] == [5, 5, 5]
    assert all(r["blanks"] is None for r in rows if r["env"] == "echo")
    assert rows == episode_rows(config)  # the same run seed gives the same episodes


@pytest.mark.django_db
def test_restarted_server_loses_the_episode_and_the_rollout_is_unscored(owner):
    port = free_port()
    Echo = adapter_class(metadata_name="echo", base_url=f"http://127.0.0.1:{port}", env_name="echo")
    adapter = Echo()
    with run_env_server("envs.echo.server:app", SERVER_ENV, port=port):
        adapter.reset(target="hello world")
        assert adapter.echo(message="hello") == "hello"
    with run_env_server("envs.echo.server:app", SERVER_ENV, port=port):
        with pytest.raises(EpisodeLost):
            adapter.echo(message="hello world")  # would score 1.0 on a fresh episode: must not
        assert adapter.lost is True
        with pytest.raises(EpisodeLost):
            adapter.echo(message="hello world")  # no later step either
        term = compile_term(RewardTerm(name="env_reward", kind="env_reward"))
        assert term(environments=[adapter]) == [None]

    run = RunFactory(owner=owner, name="r", max_steps=1)
    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="w")
    telemetry_record(
        run_id=run.pk,
        lease_owner="lease-a",
        events=[
            (
                "rollouts",
                [
                    {
                        "step": 1,
                        "env": "echo",
                        "messages": [],
                        "rewards": {"env_reward": None},
                        "reward": None,
                        "lost": True,
                        "lost_reason": adapter.lost_reason,
                    },
                    {
                        "step": 1,
                        "env": "echo",
                        "messages": [],
                        "rewards": {"env_reward": 0.5},
                        "reward": 0.5,
                        "lost": False,
                    },
                ],
            )
        ],
    )
    assert list(Rollout.objects.filter(run=run).values_list("seq", "unscored", "reward")) == [
        (1, True, None),
        (2, False, 0.5),
    ]
    event = RunEvent.objects.get(run=run, kind="episode_lost")
    assert event.data == {"step": 1, "envs": ["echo"], "seqs": [1], "reasons": [adapter.lost_reason]}
    assert adapter.lost_reason.startswith("step failed (RuntimeError: Server error: No episode in progress")


def test_capacity_reached_names_environment_capacity_and_batch():
    with run_env_server("envs.echo.server:app", {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "1"}) as url:
        Echo = adapter_class(metadata_name="echo", base_url=url, env_name="echo")
        Bound = type(
            "Bound", (Echo,), {"catalog_name": "echo-small", "capacity": 1, "batch_size": 4}
        )
        first = Bound()
        first.reset(target="a")
        with pytest.raises(EnvironmentAtCapacity) as refused:
            Bound().reset(target="b")
        assert str(refused.value) == (
            f"Environment 'echo-small' at {url} refused a session (CAPACITY_REACHED): it takes 1 concurrent "
            "session, and the generation batch of 4 rollouts needs one each. A smaller batch cannot fit: "
            "num_generations is at least 2, so the smallest generation batch is 2 rollouts; restart the server "
            "with a larger MAX_CONCURRENT_ENVS, then measure its capacity again."
        )
        # The limit the server stated, and whose it is, for the worker to store on the row.
        assert (refused.value.capacity, refused.value.env_name) == (1, "echo")
        first._close()
