"""Small helpers shared by the end-to-end tests."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from webapp.catalog.services import environment_register
from webapp.runs.models import MetricPoint, Run


def wait_for(predicate, timeout: float, what: str, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def freeze_when(child: int, condition: Callable[[], Any], timeout: float, what: str) -> None:
    """Freeze the training process `child` (SIGSTOP) the moment `condition` holds, and keep it
    frozen only if it still holds once frozen (else let it go on and wait for the next chance):
    a chaos test then acts at that moment and sends SIGCONT itself."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            os.kill(child, signal.SIGSTOP)
            if condition():
                return
            os.kill(child, signal.SIGCONT)
        time.sleep(0.002)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def run_config(
    env_id: int, *, max_steps: int, save_steps: int = 5, rows: int = 32, **grpo: Any
) -> dict:
    return {
        "name": "e2e",
        "model": "demo:echo",
        "environments": [
            {"environment": env_id, "name": "echo", "prompt": "Echo '{phrase}'.", "rows": rows}
        ],
        "rewards": [
            {"name": "env_reward", "kind": "env_reward", "weight": 1.0},
            {"name": "tool_called", "kind": "tool_called", "weight": 0.1},
        ],
        "grpo": {
            "num_generations": 4,
            "max_steps": max_steps,
            "per_device_train_batch_size": 4,
            "max_completion_length": 48,
            "max_tool_calling_iterations": 2,
            "learning_rate": 5e-5,
            "save_steps": save_steps,
            **grpo,
        },
    }


def register_lab_entry(api: APIClient, name: str, url: str, **fields: Any) -> int:
    """A server of the lab's own environments (echo, wordle, ...) registered under that very
    name, owned by the client's user: as the bundled registration and envlab_setup do, since
    a user's request may not take a bundled name (webapp.catalog.names). Registering through
    the API is tested in tests/catalog and tests/api. Returns the entry's id."""
    environment = environment_register(
        owner=api.envlab_user, name=name, base_url=url, allow_reserved_name=True, **fields
    )
    return environment.pk


def register_echo(api: APIClient, echo_url: str) -> int:
    return register_lab_entry(api, "echo", echo_url, capacity=64)


def wait_status(run_id: int, statuses: tuple[str, ...], timeout: float, worker=None) -> Run:
    def done() -> Run | None:
        run = Run.objects.get(pk=run_id)
        return run if run.status in statuses else None

    try:
        return wait_for(done, timeout, f"run {run_id} to reach {statuses}")
    except AssertionError:
        run = Run.objects.get(pk=run_id)
        log = worker.log_text()[-6000:] if worker is not None else ""
        raise AssertionError(
            f"run {run_id} is {run.status} at step {run.step}: {run.error}\n{log}"
        ) from None


def metric_steps(run_id: int, key: str) -> list[int]:
    return list(
        MetricPoint.objects.filter(run_id=run_id, key=key)
        .order_by("step")
        .values_list("step", flat=True)
    )
