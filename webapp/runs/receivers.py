"""What the runs app does when the apps below it announce a change (connected in apps.py)."""

from __future__ import annotations

from typing import Any

from webapp.catalog.signals import environment_unshared
from webapp.runs.services import runs_stop_without_access


def _stop_runs_without_access(sender: Any, *, environment_id: int, **kwargs: Any) -> None:
    # Inside the un-sharing transaction: the entry and the runs' ends commit together.
    runs_stop_without_access(environment_id=environment_id)


def connect() -> None:
    environment_unshared.connect(_stop_runs_without_access, dispatch_uid="envlab-runs-unshared")
