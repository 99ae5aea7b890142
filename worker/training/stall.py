"""Stuck, not dead: a run whose heartbeat is alive while its step counter has not moved for
ENVLAB_STALL_SECONDS gets a `stalled` alert that names what training is doing (from the
activity record, envs/adapters/activity.py); the alert clears when a step ends.

The heartbeat thread (worker/training/telemetry.py) asks `observe` once a beat: it keeps
beating while the training thread is blocked (a tool call that never returns, a deadlocked
collective), which is exactly when this must speak. The training thread does nothing for it
beyond the step counter it already sets and the activity record's attribute writes.

An alert only: a thread blocked in a socket read cannot be stopped from another thread, and a
stuck call usually ends when its environment server is restarted (the episode is then lost and
training goes on, envs/adapters/outage.py). A cancel takes effect once the stuck call returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from envs.adapters.activity import Doing

STALL_ALERT = "stalled"


def duration(seconds: float) -> str:
    """A duration as people say it: "45 s", "15 min", "1 h 5 min"."""
    seconds = max(0, round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


class StallWatch:
    """`observe(step)` each beat returns the alert event to record, or None. Thread-safe: the
    heartbeat thread and the sink's close may both ask."""

    def __init__(
        self,
        *,
        limit_seconds: float,
        doing: Callable[[], Doing | None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit_seconds = limit_seconds
        self._doing = doing
        self._clock = clock
        self._lock = threading.Lock()
        self._step: int | None = None
        self._moved_at = clock()
        self._raised = False

    def observe(self, step: int) -> dict[str, Any] | None:
        with self._lock:
            now = self._clock()
            if step != self._step:
                stalled = now - self._moved_at
                self._step, self._moved_at = step, now
                if self._raised:
                    self._raised = False
                    return self._alert(step, f"training moved again: step {step} ended after {duration(stalled)}", False)
                return None
            stalled = now - self._moved_at
            if self._raised or self.limit_seconds <= 0 or stalled < self.limit_seconds:
                return None
            self._raised = True
            doing = self._doing()
            where = doing.describe() if doing is not None else "an unknown phase"
            in_it = f", in it for {duration(now - doing.since)}" if doing is not None else ""
            return self._alert(
                step + 1,
                f"stalled for {duration(stalled)} in {where}{in_it}: step {step + 1} has not ended "
                f"(ENVLAB_STALL_SECONDS is {self.limit_seconds:g}). The heartbeat is alive, so the worker "
                "keeps the run; restarting a stuck environment server ends the call, a cancel takes "
                "effect when it returns.",
                True,
            )

    def ended(self, step: int) -> dict[str, Any] | None:
        """Training ended at `step`: the event that clears a stall still raised, else None."""
        with self._lock:
            if not self._raised:
                return None
            self._raised = False
            if step != self._step:
                stalled = self._clock() - self._moved_at
                return self._alert(step, f"training moved again: step {step} ended after {duration(stalled)}", False)
            return self._alert(step + 1, "training ended while stalled", False)

    @staticmethod
    def _alert(step: int, message: str, active: bool) -> dict[str, Any]:
        return {"kind": STALL_ALERT, "step": step, "message": message, "active": active}
