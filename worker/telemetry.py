"""The telemetry sink: the trainer hands it events without waiting; a background flusher
writes them to the database (the truth) and then announces them on the run's channel group.

The training loop only appends to a deque. Database or Redis trouble delays the dashboard,
never the run: failed writes are retried with the events kept in order, failed
announcements are dropped (clients catch up over REST). The flusher also renews the run's
lease and reads the cancel flag, so the training step never touches the database.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class _Batch:
    events: list[tuple[str, Any]] = field(default_factory=list)  # metrics and rollouts, in order
    checkpoint: int | None = None

    def empty(self) -> bool:
        return not (self.events or self.checkpoint is not None)


class TelemetrySink:
    def __init__(
        self,
        *,
        run_id: int,
        lease_owner: str,
        heartbeat_seconds: float = 2.0,
        publish: bool = True,
        publish_timeout: float = 1.0,
    ) -> None:
        self.run_id = run_id
        self.lease_owner = lease_owner
        self.heartbeat_seconds = heartbeat_seconds
        self.publish = publish
        self.publish_timeout = publish_timeout
        self.cancel_requested = threading.Event()
        self.lease_lost = threading.Event()
        self.step = 0
        self.stats = {"flushes": 0, "db_errors": 0, "publish_errors": 0, "events": 0}
        self._events: deque[tuple[str, Any]] = deque()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pending = _Batch()  # taken from the queue, not yet written
        self._loop: asyncio.AbstractEventLoop | None = None
        self._layer: Any = None
        self._thread = threading.Thread(target=self._run, name=f"telemetry-run-{run_id}", daemon=True)
        self._thread.start()

    # --- called from the training loop: constant time, never blocks ---------------------

    def metrics(self, step: int, values: dict[str, Any]) -> None:
        self._put("metrics", (step, dict(values)))

    def rollouts(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self._put("rollouts", rows)

    def step_done(self, step: int) -> None:
        self.step = step

    def checkpoint(self, step: int) -> None:
        self._put("checkpoint", step)

    def _put(self, kind: str, item: Any) -> None:
        self._events.append((kind, item))
        self._wake.set()

    # --- lifecycle -----------------------------------------------------------------------

    def close(self, timeout: float = 30.0) -> bool:
        """Stop after writing everything queued; returns False if it could not in time."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        return not self._thread.is_alive() and not self._events and self._pending.empty()

    # --- the flusher thread ---------------------------------------------------------------

    def _drain(self) -> None:
        while self._events:
            kind, item = self._events.popleft()
            self.stats["events"] += 1
            if kind == "checkpoint":
                self._pending.checkpoint = item
            else:
                self._pending.events.append((kind, item))

    def _run(self) -> None:
        from django.db import DataError, IntegrityError, close_old_connections

        self._loop = asyncio.new_event_loop()
        backoff = 0.0
        last_beat = 0.0
        try:
            while True:
                stopping = self._stop.is_set()
                self._drain()
                due_beat = time.monotonic() - last_beat >= self.heartbeat_seconds
                if not self._pending.empty() or due_beat:
                    try:
                        notes = self._write(heartbeat=due_beat)
                        if due_beat:
                            last_beat = time.monotonic()
                        backoff = 0.0
                    except (DataError, IntegrityError) as exc:
                        # Not an outage: retrying this batch would fail forever and hold back
                        # every later step. Keep what can be stored, one event at a time.
                        self.stats["db_errors"] += 1
                        log.warning("run %s: telemetry batch refused (%s); salvaging it", self.run_id, exc)
                        close_old_connections()
                        notes = self._salvage()
                    except Exception as exc:  # database down or locked: keep the batch, retry
                        self.stats["db_errors"] += 1
                        log.warning("run %s: telemetry write failed, will retry: %s", self.run_id, exc)
                        close_old_connections()
                        _drop_connection()
                        backoff = min(5.0, max(0.2, backoff * 2))
                        if stopping and self._stop_deadline_passed():
                            return
                        self._wake.wait(backoff)
                        self._wake.clear()
                        continue
                    if notes and self.publish:
                        self._announce(notes)
                if stopping and not self._events and self._pending.empty():
                    return
                if not self._events:
                    self._wake.wait(self.heartbeat_seconds)
                    self._wake.clear()
        finally:
            _drop_connection()
            if self._loop is not None:
                self._loop.close()

    _stop_deadline: float | None = None

    def _stop_deadline_passed(self) -> bool:
        if self._stop_deadline is None:
            self._stop_deadline = time.monotonic() + 20.0
        return time.monotonic() > self._stop_deadline

    def _write(self, *, heartbeat: bool) -> list[dict[str, Any]]:
        """Write what is pending; renew the lease (and read the cancel flag) only when due,
        so a step costs one short transaction and the training thread keeps the GIL."""
        from webapp.runs.services import run_checkpointed, run_heartbeat
        from webapp.runs.telemetry import telemetry_record

        batch = self._pending
        notes: list[dict[str, Any]] = []
        if batch.events:
            notes = telemetry_record(run_id=self.run_id, events=batch.events)
        if batch.checkpoint is not None:
            run_checkpointed(run_id=self.run_id, lease_owner=self.lease_owner, step=batch.checkpoint)
        self._pending = _Batch()
        self.stats["flushes"] += 1
        if not heartbeat:
            return notes
        ours, cancel = run_heartbeat(run_id=self.run_id, lease_owner=self.lease_owner, step=self.step or None)
        if not ours:
            self.lease_lost.set()
        if cancel:
            self.cancel_requested.set()
        return notes

    def _salvage(self) -> list[dict[str, Any]]:
        """Write a refused batch event by event (rollouts one by one); drop and count only
        what the database refuses on its own. The checkpoint and heartbeat come next loop."""
        from django.db import DataError, IntegrityError

        from webapp.runs.telemetry import telemetry_record

        batch, self._pending = self._pending, _Batch(checkpoint=self._pending.checkpoint)
        notes: list[dict[str, Any]] = []
        for kind, payload in batch.events:
            pieces = [(kind, [row]) for row in payload] if kind == "rollouts" else [(kind, payload)]
            for piece in pieces:
                try:
                    notes += telemetry_record(run_id=self.run_id, events=[piece])
                except (DataError, IntegrityError) as exc:
                    self.stats["dropped_events"] = self.stats.get("dropped_events", 0) + 1
                    log.error("run %s: dropped one %s event the database refuses: %s", self.run_id, kind, exc)
        return notes

    def _announce(self, notes: list[dict[str, Any]]) -> None:
        from channels.layers import channel_layers, get_channel_layer

        from webapp.runs.live import run_group

        assert self._loop is not None
        if self._layer is None:
            self._layer = get_channel_layer()
        if self._layer is None:
            return
        group = run_group(self.run_id)

        async def send_all() -> None:
            for note in notes:
                await self._layer.group_send(group, {"type": "run.event", "payload": note})

        try:
            self._loop.run_until_complete(asyncio.wait_for(send_all(), self.publish_timeout))
        except Exception as exc:  # Redis down or frozen: the database already has it
            self.stats["publish_errors"] += 1
            log.info("run %s: live announcement dropped: %s", self.run_id, exc)
            # A fresh layer next time: the old one may hold a broken connection pool.
            self._layer = channel_layers.make_backend("default")


def _drop_connection() -> None:
    from django.db import connection

    try:
        connection.close()
    except Exception:  # noqa: S110 - a dead connection may fail to close; it is gone either way
        pass
