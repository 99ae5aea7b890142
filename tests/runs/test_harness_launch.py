"""Launching a harness run: its dataset, harness and sandbox must be ones the Harbor server
listed at registration, and the server must hold one more session than rollouts in flight."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import EnvironmentFactory
from webapp.catalog.models import Environment
from webapp.runs.config import parse_run_config
from webapp.runs.services import run_config_check, run_config_warnings

pytestmark = pytest.mark.django_db

HARBOR = {
    "datasets": [{"name": "mini", "num_tasks": 3}],
    "harnesses": [{"name": "bash", "status": "validated"}],
    "sandboxes": [{"name": "docker", "available": True}, {"name": "e2b", "available": False}],
    "tasks": [],
}


def _harbor_server(owner: Any, capacity: int, **metadata: Any) -> Environment:
    """The Harbor server "bench" as its probe stored it: HARBOR's catalog and `capacity`."""
    return EnvironmentFactory(
        owner=owner, name="bench", kind="harbor", capacity=capacity,
        metadata={"style": "harbor", "harbor": HARBOR, **metadata},
    )


def _config(environment: Environment, **harness: Any) -> Any:
    return parse_run_config({
        "name": "agent", "model": "org/model",
        "environments": [{"environment": environment.pk, "name": "harbor", "prompt": ""}],
        "device": "cuda", "generation": {"backend": "vllm", "vllm_mode": "server", "vllm_server_base_url": "http://127.0.0.1:9"},
        "harness": {"dataset": "mini", "harness": "bash", "tasks": 3, **harness},
    })


def test_the_harness_settings_are_checked_against_the_servers_catalog(owner) -> None:
    harbor = _harbor_server(owner, capacity=8)
    errors = run_config_check(config=_config(harbor), user=owner)
    assert not any(key.startswith("harness") for key in errors), errors  # only the unreachable server

    errors = run_config_check(
        config=_config(harbor, dataset="other", harness="opencode", sandbox="e2b", tasks=3, max_concurrent_rollouts=8),
        user=owner,
    )
    assert errors["harness.dataset"] == ["'bench' offers datasets: mini; not 'other'"]
    assert errors["harness.harness"] == ["'bench' offers harnesses: bash; not 'opencode'"]
    assert errors["harness.sandbox"] == ["'bench' offers sandboxes: docker; not 'e2b'"]  # e2b is not available
    assert errors["harness.max_concurrent_rollouts"] == [
        "environment 'bench' takes 8 concurrent sessions, fewer than the 9 that 8 rollouts in flight need (one "
        "more for the rollout worker): lower harness.max_concurrent_rollouts to 7, or make the server take more: "
        "mark its environment class "
        "concurrency-safe (SUPPORTS_CONCURRENT_SESSIONS = True) and pass max_concurrent_envs to create_app, "
        "then measure its capacity again"
    ]
    assert run_config_check(config=_config(harbor, tasks=4), user=owner)["harness.tasks"] == [
        "dataset 'mini' has 3 tasks, fewer than 4"
    ]


def test_a_harbor_server_only_in_a_harness_run_and_a_harness_run_only_on_one(owner) -> None:
    harbor = EnvironmentFactory(
        owner=owner, name="bench", kind="harbor", metadata={"harbor": HARBOR},
    )
    echo = EnvironmentFactory(owner=owner, name="echo")
    plain = parse_run_config({"name": "r", "model": "org/model", "environments": [{"environment": harbor.pk, "prompt": "x"}]})
    assert "trains in a harness run" in run_config_check(config=plain, user=owner)["environments.0.environment"][0]
    errors = run_config_check(config=_config(echo), user=owner)
    assert errors["environments.0.environment"] == ["a harness run trains on a Harbor server; 'echo' is openenv"]


def test_a_measured_lower_bound_warns_a_harness_run_instead_of_refusing_it(owner) -> None:
    harbor = _harbor_server(
        owner, capacity=4, capacity_source="probed (at least)", capacity_stopped_by="deadline"
    )
    config = _config(harbor, max_concurrent_rollouts=8)

    errors = run_config_check(config=config, user=owner)
    warnings = run_config_warnings(config=config, user=owner)

    assert "harness.max_concurrent_rollouts" not in errors
    assert warnings == {"harness.max_concurrent_rollouts": [
        "environment 'bench' takes at least 4 concurrent sessions (measured; the measurement ran out of time), "
        "fewer than the 9 that 8 rollouts in flight need (one more for the rollout worker): the run is launched, "
        "but if the server takes fewer than 9 it refuses a session and the run fails. To know its limit, measure its "
        "capacity again with a longer ENVLAB_PROBE_DEADLINE, or register it declaring its capacity"
    ]}
