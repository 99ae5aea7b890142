"""A finished GRPO run on the echo environment, as the checkpoint-evaluation tests start from."""

from __future__ import annotations

from typing import Any

from tests.factories import RunFactory
from tests.support.checkpoints import checkpoint_folder
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


def two_step_run_with_checkpoint(
    owner: Any, settings: Any, name: str, environment: dict[str, Any], **config: Any
) -> Run:
    """A succeeded 2-step run `name` of `owner`'s on the demo echo model, trained on the one
    `environment` entry (plus any other `config` keys), with its checkpoint-2 folder on disk
    under settings.RUNS_DIR: a run whose checkpoints a test evaluates."""
    run = RunFactory(
        owner=owner,
        name=name,
        max_steps=2,
        status="succeeded",
        checkpoint_step=2,
        config={"name": name, "model": "demo:echo", "environments": [environment], **config},
    )
    checkpoint_folder(settings.RUNS_DIR / str(run.pk) / "checkpoint-2", {"trainer_state.json": "{}"})
    return run
