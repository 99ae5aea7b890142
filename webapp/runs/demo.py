"""The one-click demo: the offline demo model learning to echo on the user's `echo` environment.

One service for the home page's button and `POST /api/runs/demo/`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from webapp.catalog.models import Environment
from webapp.runs.config import RunConfigError
from webapp.runs.models import Run
from webapp.runs.presets import bundled_environment
from webapp.runs.services import run_launch

DEMO_ENVIRONMENT = "echo"
DEMO_MODEL = "demo:echo"


def demo_config(environment_id: int, *, model: str = DEMO_MODEL) -> dict[str, Any]:
    """The demo run, tuned with worker/demo_model's "demo" build (see its RECIPES): the
    warm-up leaves the model calling `echo` well but copying the phrase unreliably, so the
    first steps score about 0.5; 8 prompts x 8 rollouts a step, sampled at temperature 0.7,
    and a rate far above what a large model would take (the model has 230k parameters) have
    it copying reliably (about 0.93) by step 30. The generation batch of 64 is the bundled
    echo server's default capacity."""
    return {
        "name": "echo-demo",
        "model": model,
        "environments": [
            {
                "environment": environment_id,
                "name": "echo",
                "prompt": "Echo '{phrase}'.",
                "rows": 256,
            }
        ],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        "grpo": {
            "num_generations": 8,
            "max_steps": 30,
            "per_device_train_batch_size": 64,
            "max_completion_length": 64,
            "learning_rate": 4e-4,
            "temperature": 0.7,
        },
    }


def demo_environment(*, user: User) -> Environment | None:
    """The bundled echo server's entry that `user` may use (webapp.runs.presets.bundled_environment)."""
    return bundled_environment(user=user, key=DEMO_ENVIRONMENT)


def run_launch_demo(*, owner: User) -> Run:
    """Queue the demo run for `owner`, with run_launch's checks, quota and errors.

    Without an echo environment the config still goes through the checks (id 0 matches no
    row), so a missing demo model is reported in the same answer."""
    echo = demo_environment(user=owner)
    try:
        return run_launch(owner=owner, data=demo_config(echo.pk if echo else 0))
    except RunConfigError as exc:
        if echo is not None:
            raise
        errors = {
            **exc.errors,
            "environments.0.environment": [
                f"no environment named '{DEMO_ENVIRONMENT}' is registered: start the echo server "
                f"and register it as '{DEMO_ENVIRONMENT}' on the Environments page"
            ],
        }
        raise type(exc)(errors) from None
