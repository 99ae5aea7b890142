"""The SFT warm-up's config, launch checks and datasets (worker/training/warmup.py), against a real
catch server (uvicorn)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from envs.solvers import solver_class
from tests.envs.servers import run_env_server
from tests.factories import EnvironmentFactory, RolloutFactory, RunFactory
from webapp.runs.config import RunConfigError, parse_run_config
from webapp.runs.models import Run
from webapp.runs.services import run_config_check, run_launch

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "OPENENV_MODE": "simulation"}
PROMPT = "Catch the ball: use move or stay."
BASE = {"name": "w", "model": "demo:echo", "environments": [{"environment": 1, "prompt": "hi"}]}


def checked(config: Any, user: Any) -> dict[str, list[str]]:
    """run_config_check's answer without the model's: no demo model is built for these tests."""
    return {k: v for k, v in run_config_check(config=config, user=user).items() if k != "model"}


def errors_of(extra: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(RunConfigError) as caught:
        parse_run_config({**BASE, **extra})
    return caught.value.errors


# --- config (no database) ----------------------------------------------------------------


def test_warmup_defaults_and_a_warmup_alone() -> None:
    config = parse_run_config({**BASE, "sft_warmup": {"source": "solver"}, "grpo": None})
    assert config.sft_warmup is not None and config.grpo is None
    assert config.sft_warmup.model_dump() == {
        "kind": "sft",
        "source": "solver",
        "run": None,
        "min_reward": 1.0,
        "episodes": 64,
        "epochs": 2,
        "learning_rate": 1e-4,
        "per_device_train_batch_size": 8,
        "max_length": 2048,
        "seed": 0,
    }
    # 64 episodes in batches of 8, twice.
    assert (config.total_steps, config.seed) == (16, 0)
    assert parse_run_config(BASE).sft_warmup is None


def test_grpo_null_needs_a_warmup() -> None:
    assert errors_of({"grpo": None}) == {
        "grpo": ["grpo may be null only for a run with a warm-up: give `sft_warmup` or `grpo`"]
    }


def test_source_and_run_must_agree() -> None:
    assert errors_of({"sft_warmup": {"source": "run"}}) == {
        "sft_warmup.run": ['source "run" needs the id of the run whose rollouts to keep']
    }
    assert errors_of({"sft_warmup": {"source": "solver", "run": 3}}) == {
        "sft_warmup.run": ['only source "run" takes a run; the solver plays its own episodes']
    }


def test_warmup_bounds() -> None:
    errors = errors_of(
        {"sft_warmup": {"source": "solver", "episodes": 0, "epochs": 101, "kind": "dpo"}}
    )
    assert errors == {
        "sft_warmup.kind": ["Input should be 'sft'"],
        "sft_warmup.episodes": ["Input should be greater than or equal to 1"],
        "sft_warmup.epochs": ["Input should be less than or equal to 100"],
    }
    assert errors_of({"sft_warmup": {"source": "teacher"}}) == {
        "sft_warmup.source": ["Input should be 'solver' or 'run'"]
    }


# --- launch checks and datasets (database, real server) ----------------------------------


@pytest.fixture(scope="module")
def catch_url() -> Iterator[str]:
    with run_env_server("envs.catch.server:app", SERVER_ENV) as url:
        yield url


@pytest.fixture
def catch_env(api: Any, catch_url: str) -> int:
    response = api.post(
        "/api/environments/", {"name": "my-catch", "base_url": catch_url, "capacity": 8}, format="json"
    )
    assert response.status_code == 201, response.json()
    return int(response.json()["id"])


def catch_config(env_id: int, **warmup: Any) -> dict[str, Any]:
    return {
        "name": "catch-warmup",
        "model": "demo:echo",
        "environments": [
            {
                "environment": env_id,
                "name": "catch",
                "prompt": PROMPT,
                "rows": 4,
                "reset": {"rows": 5, "columns": 3},
            }
        ],
        "sft_warmup": {"source": "solver", "episodes": 6, **warmup},
        "grpo": None,
    }


@pytest.mark.django_db
def test_launch_checks_the_warmup_source(
    owner: Any, outsider: Any, catch_env: int, catch_url: str
) -> None:

    assert solver_class("catch") is not None
    solver_ok = parse_run_config(catch_config(catch_env))
    assert checked(solver_ok, owner) == {}
    # The same server registered without the bundled marker: no solver for it.
    plain = EnvironmentFactory(
        name="plain", base_url=catch_url, owner=owner, capacity=8, metadata={},
    )
    no_solver = parse_run_config(catch_config(plain.pk))
    assert checked(no_solver, owner) == {
        "environments.0.environment": [
            "environment 'plain' has no solver (only the bundled echo, wordle, catch and sudoku have one): "
            'use sft_warmup source "run" with an earlier run\'s rollouts'
        ]
    }
    source = RunFactory(owner=owner, name="src", max_steps=1)
    RolloutFactory(run=source, reward=0.5)
    RolloutFactory(run=source, reward=1.0, unscored=True)
    from_run = parse_run_config(catch_config(catch_env, source="run", run=source.pk))
    assert checked(from_run, owner) == {
        "sft_warmup.run": [
            f"run {source.pk} has no scored rollout with a reward of at least 1: "
            "lower sft_warmup.min_reward or pick another run"
        ]
    }
    assert checked(from_run, outsider) == {
        "environments.0.environment": [f"no environment with id {catch_env}"],
        "sft_warmup.run": [f"no run with id {source.pk}"],
    }
    runs = Run.objects.count()
    with pytest.raises(RunConfigError):
        run_launch(owner=owner, data=catch_config(catch_env, source="run", run=source.pk))
    assert Run.objects.count() == runs  # a rejected launch writes nothing


@pytest.mark.django_db
def test_solver_episodes_become_sft_rows(owner: Any, catch_env: int) -> None:
    from worker.episodes import tool_schemas
    from worker.training.runner import environment_factory
    from worker.training.warmup import solver_examples

    config = parse_run_config(catch_config(catch_env, episodes=6))
    factory, _ = environment_factory(config, owner)
    tools = tool_schemas(factory())
    examples, played = solver_examples(config=config, tools=tools, owner=owner)
    # The catch solver always catches (reward 1.0): every episode is kept, 4 rows then 2 fresh seeds.
    assert (played, len(examples)) == (6, 6)
    first = examples[0]
    assert json.loads(first["tools"]) == tools
    assert sorted(t["function"]["name"] for t in tools) == ["move", "stay"]
    messages = first["messages"]
    assert messages[0]["role"] == "user" and messages[0]["content"].startswith(PROMPT + "\n")
    assert [m["role"] for m in messages[1:3]] == ["assistant", "tool"]
    call = messages[1]["tool_calls"][0]["function"]
    assert call["name"] in ("move", "stay")
    assert isinstance(call["arguments"], str) and json.loads(call["arguments"]) in (
        {},
        {"direction": "left"},
        {"direction": "right"},
    )
    assert messages[-1]["role"] == "assistant" and messages[-1]["tool_calls"] is None
    # A 5-row grid: the ball falls 4 rows, one move each.
    assert sum(1 for m in messages if m["tool_calls"]) == 4
    assert "Caught the ball" in messages[-2]["content"]
    # Seeded: the same run config plays the same episodes.
    again, _ = solver_examples(config=config, tools=tools, owner=owner)
    assert again == examples


@pytest.mark.django_db
def test_stored_rollouts_kept_by_reward(owner: Any, outsider: Any) -> None:
    from webapp.runs.config import WarmupSettings
    from worker.training.warmup import run_examples

    source = RunFactory(owner=owner, name="src", max_steps=1)
    prompt = [{"role": "user", "content": "Catch.\ngrid"}]
    call = {"type": "function", "function": {"name": "stay", "arguments": {}}}
    good = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "stay", "content": "ok"},
        {"role": "assistant", "content": "Done."},
    ]
    RolloutFactory(run=source, seq=1, prompt=prompt, messages=good, reward=1.0)
    RolloutFactory(run=source, seq=2, prompt=prompt, messages=good, reward=0.25)
    RolloutFactory(
        run=source, seq=3, step=2, prompt=prompt, messages=good, reward=1.0, unscored=True
    )
    RolloutFactory(run=source, seq=4, step=2, prompt=prompt, messages=good[::-1][:1], reward=1.5)
    tools = [
        {"type": "function", "function": {"name": "stay", "description": "Stay.", "parameters": {}}}
    ]
    warmup = WarmupSettings(source="run", run=source.pk, min_reward=1.0, episodes=10)
    examples, read = run_examples(warmup=warmup, tools=tools, user=owner)
    assert read == 2  # seq 1 and 4: seq 2 scored too low, seq 3 unscored
    assert [e["messages"] for e in examples] == [
        [
            {"role": "user", "content": "Catch.\ngrid", "tool_calls": None, "name": None},
            {
                "role": "assistant",
                "content": "",
                "name": None,
                "tool_calls": [
                    {"type": "function", "function": {"name": "stay", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "content": "ok", "name": "stay", "tool_calls": None},
            {"role": "assistant", "content": "Done.", "tool_calls": None, "name": None},
        ],
        [
            {"role": "user", "content": "Catch.\ngrid", "tool_calls": None, "name": None},
            {"role": "assistant", "content": "Done.", "tool_calls": None, "name": None},
        ],
    ]
    assert json.loads(examples[0]["tools"]) == tools
    newest = WarmupSettings(source="run", run=source.pk, min_reward=1.0, episodes=1)
    assert [
        e["messages"][-1]["content"]
        for e in run_examples(warmup=newest, tools=tools, user=owner)[0]
    ] == ["Done."]
    with pytest.raises(ValueError, match=f"no run with id {source.pk}"):
        run_examples(warmup=warmup, tools=tools, user=outsider)
