"""A finished GRPO run on the echo environment, as the checkpoint-evaluation tests start from."""

from __future__ import annotations

from typing import Any

from tests.factories import RunFactory
from webapp.runs.models import Run


def trained_echo_run(owner: Any, env_id: int, checkpoint_step: int | None) -> Run:
    """A succeeded 4-step run of ``owner``'s on echo environment ``env_id``, its last checkpoint
    at ``checkpoint_step``; its checkpoint folders are the caller's to make."""
    return RunFactory(
        owner=owner,
        name="trained",
        max_steps=4,
        status="succeeded",
        checkpoint_step=checkpoint_step,
        config={
            "name": "trained",
            "model": "demo:echo",
            "environments": [
                {"environment": env_id, "name": "echo", "prompt": "Echo '{phrase}'.", "rows": 8}
            ],
            "grpo": {
                "num_generations": 4,
                "max_steps": 4,
                "per_device_train_batch_size": 4,
                "max_completion_length": 48,
                "max_tool_calling_iterations": 2,
            },
        },
    )
