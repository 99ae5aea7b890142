"""A sweep's base config against the session's echo server, and its owner's quota."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def base(echo_env: Any, built_model: str) -> dict[str, Any]:
    return {
        "name": "t",
        "model": built_model,
        "environments": [{"environment": echo_env.pk, "name": "echo", "prompt": "Echo 'hi'.", "rows": 8}],
        "rewards": [
            {"name": "env_reward", "kind": "env_reward", "weight": 1.0},
            {"name": "tool_called", "kind": "tool_called", "weight": 0.1},
        ],
        "grpo": {"num_generations": 4, "max_steps": 2, "per_device_train_batch_size": 4, "learning_rate": 5e-5},
    }


@pytest.fixture
def quota_of_two(settings: Any) -> None:
    settings.ENVLAB_MAX_ACTIVE_RUNS = 2
    settings.ENVLAB_MAX_ACTIVE_WORK = 8


GRID = {"grpo.learning_rate": [1e-5, 1e-4], "grpo.seed": [0, 1, 2]}
