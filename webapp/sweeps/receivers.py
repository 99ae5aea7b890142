"""What the sweeps app does when the runs app below it announces a run's end (connected in apps.py)."""

from __future__ import annotations

from typing import Any

from webapp.runs.signals import run_ended
from webapp.sweeps.services import sweep_release


def _release_into_freed_slot(sender: Any, *, run_id: int, owner_id: int, **kwargs: Any) -> None:
    # After the end's commit (webapp/runs/services.py `_ended`), in a transaction of its own.
    sweep_release(owner_id=owner_id)


def connect() -> None:
    run_ended.connect(_release_into_freed_slot, dispatch_uid="envlab-sweeps-run-ended")
