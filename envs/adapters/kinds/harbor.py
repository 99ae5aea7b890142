"""What envs know of a Harbor row: GRPO does not train on it (a harness run's agent plays it,
through envs.adapters.harbor's sessions), its episode reward is the verifier's, and what
registration listed of the server (datasets, harnesses, sandboxes and tasks; webapp.catalog.harbor
writes them) sits in its `metadata["harbor"]`: the launch checks and the harness run read it
here, the one way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def adapter(environment: Any, *, credentials: Mapping[str, str | None] | None = None) -> type[Any]:
    raise ValueError(f"environments of kind '{environment.kind}' cannot be trained on with GRPO here")


def episode_reward_rule(environment: Any) -> tuple[str, str]:
    return "verifier", "the verifier's reward for the agent's rollout"


def catalog(metadata: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """What registration listed of the server: {"datasets", "tasks", "harnesses", "sandboxes"}."""
    return (metadata or {}).get("harbor") or {}


def task_rows(metadata: Mapping[str, Any] | None, *, dataset: str) -> list[Mapping[str, Any]]:
    """The listed tasks of `dataset` (a task naming no dataset belongs to every one)."""
    tasks = catalog(metadata).get("tasks") or []
    return [t for t in tasks if isinstance(t, dict) and t.get("dataset") in (None, dataset)]
