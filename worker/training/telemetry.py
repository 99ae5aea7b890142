"""The telemetry sink: the trainer hands it events without waiting; a background flusher
writes them to the database (the truth) and then announces them on the run's channel group.

The training loop only appends to a deque. Database or Redis trouble delays the dashboard,
not the run: failed writes are retried with the events kept in order, failed
announcements are dropped (clients catch up over REST). A second thread renews the run's
lease and reads the cancel flag, each beat one UPDATE on its own connection, so a telemetry
batch that keeps failing or waits on a lock cannot starve the heartbeat; the training step
never touches the database. Each beat also asks the stall watch (worker/training/stall.py), if
the run has one, whether the step counter has stood still too long: the heartbeat thread keeps
going while the training thread is stuck.

Memory is bounded: at most `max_pending` events (a rollout counts one) wait to be written.
When that many wait, the training thread pauses in `record` until the flusher catches up.
When nothing could be written for `outage_seconds`, the sink gives up: `failed` is set,
the training loop stops the run with `failure` as its error, and new events are dropped.
Writes are refused once the lease is lost (another worker took the run over): the sink
then drops what it holds and sets `lease_lost`, and the training loop stops.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from webapp.runs.telemetry.metric_keys import WALL_TIME_KEY
from worker.training.stall import StallWatch

log = logging.getLogger(__name__)

Event = tuple[str, Any]


def _weight(kind: str, item: Any) -> int:
    """What an event counts against the bound: one per rollout, one per metrics dict; the
    checkpoint marker holds no memory worth counting."""
    if kind == "rollouts":
        return len(item)
    return 0 if kind == "checkpoint" else 1


@dataclass
class _Chunk:
    """Events sent to the database in one transaction. A failed write is retried with the same
    events under the same token: the write may have committed with its answer lost, and the
    database then recognises the token and stores nothing twice (telemetry_record's `chunk`)."""

    token: str
    events: list[Event]
    weight: int


@dataclass
class _Batch:
    events: list[Event] = field(default_factory=list)  # metrics and rollouts, in order
    checkpoint: int | None = None
    chunk: _Chunk | None = None  # taken from `events`, being written

    def empty(self) -> bool:
        return not (self.events or self.checkpoint is not None or self.chunk is not None)


class TelemetrySink:
    def __init__(
        self,
        *,
        run_id: int,
        lease_owner: str,
        heartbeat_seconds: float = 2.0,
        publish: bool = True,
        publish_timeout: float = 1.0,
        max_pending: int = 5000,
        outage_seconds: float = 600.0,
        chunk_events: int = 500,
        stall: StallWatch | None = None,
    ) -> None:
        self.run_id = run_id
        self.lease_owner = lease_owner
        self.heartbeat_seconds = heartbeat_seconds
        self.publish = publish
        self.publish_timeout = publish_timeout
        self.max_pending = max(1, max_pending)
        self.outage_seconds = outage_seconds
        self.chunk_events = max(1, chunk_events)
        self.stall = stall
        self.cancel_requested = threading.Event()
        self.lease_lost = threading.Event()
        self.failed = threading.Event()
        self.failure = ""  # why the run must stop, once `failed` is set
        self.step = 0
        self.stats: dict[str, Any] = {
            "flushes": 0, "db_errors": 0, "publish_errors": 0, "events": 0,
            "heartbeat_errors": 0, "dropped_events": 0, "paused": 0, "paused_seconds": 0.0,
        }
        self._events: deque[Event] = deque()
        # Events handed over and not yet written or dropped, and since when some have waited.
        self._room = threading.Condition()
        self._count = 0
        self._unwritten_since = time.monotonic()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._stop_beats = threading.Event()  # after the writer: the lease is kept while it writes
        self._closing_since: float | None = None
        self._pending = _Batch()  # taken from the queue, not yet written
        # Chunk tokens: this sink's own prefix (a run's warm-up and GRPO sinks share the lease).
        self._chunk_prefix = uuid.uuid4().hex[:16]
        self._chunks = 0
        self._notes: list[dict[str, Any]] = []  # written, not yet announced
        # Metric tiers (webapp/runs/telemetry/metric_tiers.py), kept up after the writes that
        # take a key past a block: each key's newest step written since, and the step kept to.
        self._tier_steps: dict[str, int] = {}
        self._tiers_kept = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._layer: Any = None
        self._thread = threading.Thread(target=self._run, name=f"telemetry-run-{run_id}", daemon=True)
        self._beats = threading.Thread(target=self._beat_forever, name=f"heartbeat-run-{run_id}", daemon=True)
        self._thread.start()
        self._beats.start()

    # --- called from the training loop: constant time; waits only when the bound is hit --

    def metrics(self, step: int, values: dict[str, Any], *, wall_time: bool = True) -> None:
        """`wall_time`: stamp the step with now (the run page's wall-time axis); off for values
        sampled beside a step (system metrics), which must not move the step's own time."""
        values = dict(values)
        if wall_time:
            values.setdefault(WALL_TIME_KEY, time.time())
        self._put("metrics", (step, values))

    def sampled(self, values: dict[str, Any]) -> None:
        """Values sampled by a thread beside training (worker/training/system_metrics.py), at the
        last step done. Never waits for room: the sampler must not hold anything up."""
        if values:
            self._put("metrics", (self.step, dict(values)), wait=False)

    def rollouts(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self._put("rollouts", rows)

    def alert(self, alert: dict[str, Any]) -> None:
        """A run-health alert raised or cleared ({kind, step, message, active})."""
        self._put("alert", dict(alert))

    def run_event(self, kind: str, message: str, data: dict[str, Any]) -> None:
        """A run event (webapp.runs.telemetry.record.RUN_EVENT_KINDS), stored in order."""
        self._put("event", {"kind": kind, "message": message, "data": dict(data)})

    def step_done(self, step: int) -> None:
        self.step = step

    def checkpoint(self, step: int) -> None:
        self._put("checkpoint", step)

    @property
    def pending(self) -> int:
        """Events handed over and not yet written: at most `max_pending` plus one batch."""
        return self._count

    def failure_reason(self) -> str:
        """Why training must stop for telemetry's sake ("" while all is well)."""
        if not self.failed.is_set() and self._count and self._outage_too_long():
            self._fail_outage()
        return self.failure if self.failed.is_set() else ""

    def _put(self, kind: str, item: Any, *, wait: bool = True) -> None:
        weight = _weight(kind, item)
        if self.lease_lost.is_set() or (weight and self.failed.is_set()):
            self.stats["dropped_events"] += weight  # the run is stopping: nothing more is written
            return
        with self._room:
            if weight and wait and self._count >= self.max_pending:
                self._wait_for_room()
                if self.lease_lost.is_set() or self.failed.is_set():
                    self.stats["dropped_events"] += weight
                    return
            if not self._count:
                self._unwritten_since = time.monotonic()
            self._count += weight
        self._events.append((kind, item))
        # Rollouts are captured when a step's generation is scored and its metrics come when
        # the step ends: they wait for those, one transaction and announcement for both,
        # not two (half the writes and wake-ups beside the training loop). The wait is at
        # most one step, or the heartbeat period, or until half the bound is used.
        if kind != "rollouts" or self._count * 2 >= self.max_pending:
            self._wake.set()

    def _wait_for_room(self) -> None:
        """Pause training until the flusher has written some events. Bounded: the wait ends
        when the outage has lasted `outage_seconds`, whatever the flusher is doing."""
        self.stats["paused"] += 1
        started = time.monotonic()
        log.warning("run %s: %s telemetry events wait to be written; training pauses", self.run_id, self._count)
        while self._count >= self.max_pending and not (
            self.failed.is_set() or self.lease_lost.is_set() or self._stop.is_set()
        ):
            self._room.wait(1.0)
            if not self._thread.is_alive():
                self._fail("the telemetry writer stopped; the run's metrics and rollouts cannot be stored")
            elif self._outage_too_long():
                self._fail_outage()
        self.stats["paused_seconds"] += time.monotonic() - started

    def _outage_too_long(self) -> bool:
        return time.monotonic() - self._unwritten_since > self.outage_seconds

    def _fail_outage(self) -> None:
        self._fail(
            f"telemetry could not be written to the database for over {self.outage_seconds:g} s "
            f"(ENVLAB_TELEMETRY_OUTAGE_SECONDS); the run stopped rather than hold more in memory. "
            "Resume it once the database is back."
        )

    def _fail(self, reason: str) -> None:
        if not self.failed.is_set():
            self.failure = reason
            self.failed.set()
            log.error("run %s: %s", self.run_id, reason)
        with self._room:
            self._room.notify_all()

    def _release(self, weight: int) -> None:
        """`weight` events were written (or dropped): make room, restart the outage clock."""
        with self._room:
            self._count = max(0, self._count - weight)
            self._unwritten_since = time.monotonic()
            self._room.notify_all()

    # --- lifecycle -----------------------------------------------------------------------

    def close(self, timeout: float = 30.0) -> bool:
        """Stop after writing everything queued, waiting out a database outage up to
        `outage_seconds` (give `timeout` more than that); returns False if something was
        not written. The heartbeat goes on until the writer is done."""
        self._closing_since = time.monotonic()
        if self.stall is not None:  # a stall still shown ends with training
            cleared = self.stall.ended(self.step)
            if cleared is not None:
                self._put("alert", cleared, wait=False)
        self._stop.set()
        self._wake.set()
        with self._room:
            self._room.notify_all()
        self._thread.join(timeout)
        self._stop_beats.set()
        self._beats.join(5.0)
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
        self._loop = asyncio.new_event_loop()
        backoff = 0.0
        try:
            while True:
                stopping = self._stop.is_set()
                self._drain()
                ok = True
                if self.lease_lost.is_set():
                    self._discard_pending()
                elif not self._pending.empty():
                    ok = self._flush()
                if stopping and not self._events and self._pending.empty():
                    return
                if not ok:  # the database is down or locked: keep everything, retry
                    if stopping and self._give_up_at_close():
                        return
                    backoff = min(5.0, max(0.2, backoff * 2))
                    # Not woken by new events: they would turn the retry into a busy loop.
                    if stopping:
                        time.sleep(backoff)
                    else:
                        self._stop.wait(backoff)
                    continue
                backoff = 0.0
                if not self._events:
                    self._wake.wait(self.heartbeat_seconds)
                    self._wake.clear()
        finally:
            _drop_connection()
            if self._loop is not None:
                self._loop.close()

    def _give_up_at_close(self) -> bool:
        """Closing with writes failing: the outage is waited out, as during training, until
        it has lasted `outage_seconds` (counted from the close when only the checkpoint
        marker waits); then the sink fails and what it holds is not written."""
        if not self.failed.is_set():
            since = self._unwritten_since if self._count else (self._closing_since or time.monotonic())
            if time.monotonic() - since <= self.outage_seconds:
                return False
            self._fail_outage()
        return True

    def _beat_forever(self) -> None:
        try:
            while not self.lease_lost.is_set():
                ok = self._beat()
                if not self._stop.is_set():  # closing: training has ended, nothing can stall
                    self._watch_stall()
                if self._stop_beats.wait(self.heartbeat_seconds if ok else min(1.0, self.heartbeat_seconds)):
                    return
        finally:
            _drop_connection()

    def _watch_stall(self) -> None:
        if self.stall is None:
            return
        try:
            alert = self.stall.observe(self.step)
        except Exception:  # the watch must never stop the heartbeat
            log.exception("run %s: stall check failed", self.run_id)
            return
        if alert is not None:
            (log.warning if alert["active"] else log.info)("run %s: %s", self.run_id, alert["message"])
            # Never waits for room: the heartbeat must go on renewing the lease.
            self._put("alert", alert, wait=False)

    def _beat(self) -> bool:
        """Renew the lease and read the cancel flag: one UPDATE of its own, whatever state
        the telemetry writes are in. Returns False when the database could not be reached."""
        from django.db import close_old_connections

        from webapp.runs.services import run_heartbeat

        try:
            ours, cancel = run_heartbeat(run_id=self.run_id, lease_owner=self.lease_owner, step=self.step or None)
        except Exception as exc:  # database down or locked: the next beat tries again
            self.stats["heartbeat_errors"] += 1
            log.warning("run %s: heartbeat failed, will retry: %s", self.run_id, exc)
            close_old_connections()
            _drop_connection()
            return False
        if not ours:
            log.warning("run %s: the lease is lost (taken over or ended); training stops", self.run_id)
            self.lease_lost.set()
        if cancel:
            self.cancel_requested.set()
        return True

    def _flush(self) -> bool:
        """Write what is pending. Returns False when the database could not be written."""
        from django.db import DataError, IntegrityError, close_old_connections

        from webapp.runs.telemetry.record import LeaseLost

        try:
            try:
                self._write()
            except (DataError, IntegrityError, TypeError, ValueError) as exc:
                # Not an outage but an event the database (or its JSON encoder) refuses:
                # retrying this batch would fail forever and hold back every later step.
                # Keep what can be stored, one event at a time.
                self.stats["db_errors"] += 1
                log.warning("run %s: telemetry batch refused (%s); salvaging it", self.run_id, exc)
                close_old_connections()
                self._salvage()
        except LeaseLost:
            log.warning("run %s: telemetry refused, the lease is lost; training stops", self.run_id)
            self.lease_lost.set()
            self._discard_pending()
        except Exception as exc:  # database down or locked: keep the rest, in order, and retry
            self.stats["db_errors"] += 1
            log.warning("run %s: telemetry write failed, will retry: %s", self.run_id, exc)
            close_old_connections()
            _drop_connection()
            if self._count and self._outage_too_long():
                self._fail_outage()
            return False
        finally:
            notes, self._notes = self._notes, []
            if notes and self.publish:
                self._announce(notes)
        self._keep_tiers(notes)
        return True

    def _keep_tiers(self, notes: list[dict[str, Any]]) -> None:
        """After the announcement (live clients first): extend the run's metric tiers when
        a written step passed a multiple of their block, so reads of a long run find them made."""
        from webapp.runs.telemetry.metric_tiers import BASE, tiers_keep_up

        for note in notes:
            if note.get("type") == "metrics":
                for key in note["values"]:
                    self._tier_steps[key] = max(self._tier_steps.get(key, 0), note["step"])
        newest = max(self._tier_steps.values(), default=0)
        if newest // BASE <= self._tiers_kept // BASE or self.lease_lost.is_set():
            return
        started = time.perf_counter()
        tiers_keep_up(run_id=self.run_id, last_steps=self._tier_steps)
        self.stats["tier_seconds"] = round(self.stats.get("tier_seconds", 0.0) + time.perf_counter() - started, 4)
        self._tier_steps = {}
        self._tiers_kept = newest

    def _write(self) -> None:
        """Write the pending events in chunks of about `chunk_events`, each one short
        transaction (after an outage the backlog is not one huge one), then the checkpoint."""
        from webapp.runs.services import run_checkpointed
        from webapp.runs.telemetry.record import telemetry_record

        batch = self._pending
        while batch.events or batch.chunk is not None:
            if batch.chunk is None:
                size, weight = 0, 0
                while size < len(batch.events) and (not size or weight < self.chunk_events):
                    weight += _weight(*batch.events[size])
                    size += 1
                batch.chunk = _Chunk(self._next_token(), batch.events[:size], weight)
                del batch.events[:size]
            chunk = batch.chunk
            self._notes += telemetry_record(
                run_id=self.run_id, lease_owner=self.lease_owner, events=chunk.events, chunk=chunk.token
            )
            batch.chunk = None
            self._release(chunk.weight)
        if batch.checkpoint is not None:
            self._notes += run_checkpointed(run_id=self.run_id, lease_owner=self.lease_owner, step=batch.checkpoint)
            batch.checkpoint = None
        self.stats["flushes"] += 1

    def _salvage(self) -> None:
        """Write a refused batch event by event (rollouts one by one); drop and count only
        what the database refuses on its own. Any other error leaves the rest pending, in
        order, for the next try. The checkpoint comes next loop."""
        from django.db import DataError, IntegrityError

        from webapp.runs.telemetry.record import telemetry_record

        events = self._pending.events
        if self._pending.chunk is not None:  # refused whole, so nothing of it was stored
            events[:0] = self._pending.chunk.events
            self._pending.chunk = None
        while events:
            kind, payload = events[0]
            if kind == "rollouts" and len(payload) > 1:
                piece: Event = (kind, payload[:1])
                events[0] = (kind, payload[1:])
            else:
                piece = events.pop(0)
            # Pending as a chunk of its own: an outage now retries it under the same token.
            chunk = self._pending.chunk = _Chunk(self._next_token(), [piece], _weight(*piece))
            try:
                self._notes += telemetry_record(
                    run_id=self.run_id, lease_owner=self.lease_owner, events=chunk.events, chunk=chunk.token
                )
            except (DataError, IntegrityError, TypeError, ValueError) as exc:
                self.stats["dropped_events"] += 1
                log.error("run %s: dropped one %s event the database refuses: %s", self.run_id, kind, exc)
            self._pending.chunk = None
            self._release(chunk.weight)

    def _next_token(self) -> str:
        self._chunks += 1
        return f"{self._chunk_prefix}:{self._chunks}"

    def _discard_pending(self) -> None:
        """The lease is lost: nothing of ours may be written any more."""
        self._drain()
        chunk = self._pending.chunk
        dropped = sum(_weight(kind, item) for kind, item in self._pending.events) + (chunk.weight if chunk else 0)
        self._pending = _Batch()
        if dropped:
            self.stats["dropped_events"] += dropped
            self._release(dropped)

    def _announce(self, notes: list[dict[str, Any]]) -> None:
        from channels.layers import channel_layers, get_channel_layer

        from webapp.runs.telemetry.live import run_group, run_message

        assert self._loop is not None
        if self._layer is None:
            self._layer = get_channel_layer()
        if self._layer is None:
            return
        group = run_group(self.run_id)

        async def send_all() -> None:
            for note in notes:
                await self._layer.group_send(group, run_message(note))

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
    except Exception:  # a dead connection may fail to close; it is gone either way
        pass
