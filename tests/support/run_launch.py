"""The launch request the run API tests start from, and the check that one is refused."""

from __future__ import annotations

from typing import Any


def launch_config(env_id: int, **overrides: Any) -> dict[str, Any]:
    """A small GRPO run on the echo environment ``env_id``; ``overrides`` replace top-level keys,
    except ``grpo``: its keys are merged into the base GRPO settings (``grpo=None`` sends none)."""
    base = {
        "name": "t",
        "model": "demo:echo",
        "environments": [{"environment": env_id, "name": "echo", "prompt": "Echo 'hi'.", "rows": 8}],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        "grpo": {"num_generations": 4, "max_steps": 2, "per_device_train_batch_size": 4},
    }
    grpo = overrides.pop("grpo", {})
    return {**base, **overrides, "grpo": None if grpo is None else {**base["grpo"], **grpo}}


def launch_refused(api: Any, data: dict[str, Any]) -> Any:
    """POST ``data`` to the launch API, check it is refused with a 400 that wrote no run and no
    run event, and return the error body."""
    from webapp.runs.models import Run, RunEvent

    response = api.post("/api/runs/", data, format="json")
    assert response.status_code == 400, response.json()
    assert (Run.objects.count(), RunEvent.objects.count()) == (0, 0)
    return response.json()
