"""Fixtures of the server-rendered pages' tests: an echo environment row with no server behind
it (the suite's echo_env has one) and an empty models folder. The personas and their clients
are tests/fixtures/accounts.py's. A running run with metrics, rollouts (one with markup in
its transcript) and events, for the run page's and the admin's tests."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.factories import EnvironmentFactory
from tests.webapp.pages import ECHO_TOOLS, XSS, make_run
from webapp.catalog.models import Environment
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent


@pytest.fixture
def echo_env(owner: User) -> Environment:
    return EnvironmentFactory(
        owner=owner,
        name="echo",
        tools=ECHO_TOOLS,
        capacity=16,
        metadata={"name": "EchoEnvironment", "version": "1.0"},
        checked_at=timezone.now(),
    )


@pytest.fixture
def no_models(settings: Any, tmp_path: Path) -> Path:
    """An empty model folder: no demo model is built in these tests."""
    settings.MODELS_DIR = tmp_path / "models"
    return settings.MODELS_DIR


@pytest.fixture
def recorded_run(owner: User, echo_env: Environment) -> Run:
    run = make_run(
        owner, status=Run.Status.RUNNING, step=2, heartbeat_at=timezone.now(), last_seq=4
    )
    run.started_at = timezone.now() - timedelta(seconds=20)
    run.save()
    for step, seq in [(1, 1), (2, 3)]:
        MetricPoint.objects.create(run=run, step=step, key="reward", value=0.25 * step, seq=seq)
        MetricPoint.objects.create(
            run=run, step=step, key="rewards/env_reward/mean", value=0.5, seq=seq
        )
        MetricPoint.objects.create(
            run=run, step=step, key="tools/failure_frequency", value=0.0, seq=seq
        )
    tool_call = {"type": "function", "function": {"name": "echo", "arguments": {"message": XSS}}}
    tool_turns = [
        {"role": "assistant", "content": XSS, "tool_calls": [tool_call]},
        {"role": "tool", "name": "echo", "content": f"echoed {XSS}"},
    ]
    # One echo rollout a step: a plain answer that scored, then a tool call whose text is markup.
    for seq, step, task, messages, rewards, reward, advantage in [
        (2, 1, "Echo 'hello'.", [{"role": "assistant", "content": "plain"}], {"env_reward": 1.0}, 1.0, 0.5),
        (4, 2, "Echo 'x'.", tool_turns, {"env_reward": 0.0, "tool_called": None}, 0.0, -0.5),
    ]:
        Rollout.objects.create(
            run=run, seq=seq, step=step, env="echo", prompt=[{"role": "user", "content": task}],
            messages=messages, rewards=rewards, reward=reward, advantage=advantage,
        )
    RunEvent.objects.create(run=run, kind="claimed", message="host:1 claimed the run (attempt 1).")
    return run
