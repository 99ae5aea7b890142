"""The telemetry sink under database trouble (security review M5), against the real database:
its memory is bounded, training pauses at the bound and loses nothing in a short outage,
a long outage stops the run with a clear error, the heartbeat does not depend on telemetry
writes, and a worker that lost its lease writes nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import OperationalError, connections
from django.utils import timezone

from webapp.runs.models import MetricPoint, Rollout, Run
from webapp.runs.services import run_claim, run_mark_stale_interrupted, run_rewind
from webapp.runs.telemetry.record import LeaseLost, telemetry_record
from worker.training.telemetry import TelemetrySink

pytestmark = pytest.mark.django_db(transaction=True)
# claimed_run (conftest.py) trains this many steps: an outage test here logs 40, past its default 10.
CLAIMED_RUN_MAX_STEPS = 100


@contextmanager
def database_locked() -> Iterator[None]:
    """Another connection holds the write lock on the run tables, as a stuck migration or a
    long transaction would: to the sink every write waits, as in an outage."""
    other = connections.create_connection("default")
    other.ensure_connection()
    raw = other.connection
    try:
        cursor = raw.cursor()
        if other.vendor == "sqlite":
            cursor.execute("BEGIN IMMEDIATE")
        else:
            raw.autocommit = False
            cursor.execute(
                "LOCK TABLE runs_run, runs_metricpoint, runs_rollout, runs_runevent IN ACCESS EXCLUSIVE MODE"
            )
        yield
    finally:
        raw.rollback()
        other.close()


def _steps(run: Run) -> list[int]:
    return list(
        MetricPoint.objects.filter(run=run, key="reward")
        .order_by("step")
        .values_list("step", flat=True)
    )


def _bounded_sink(run: Run, *, max_pending: int, outage_seconds: float) -> TelemetrySink:
    """Worker A's sink for ``run`` (quick heartbeat, no live publishing) with these limits."""
    return TelemetrySink(
        run_id=run.pk,
        lease_owner="lease-a",
        heartbeat_seconds=0.2,
        publish=False,
        max_pending=max_pending,
        outage_seconds=outage_seconds,
    )


def _trainer(sink: TelemetrySink, steps: int, produced: list[int]) -> threading.Thread:
    def loop() -> None:
        for step in range(1, steps + 1):
            sink.metrics(step, {"reward": step / steps})
            produced.append(step)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_a_short_outage_pauses_training_at_the_bound_and_loses_nothing(claimed_run):
    sink = _bounded_sink(claimed_run, max_pending=10, outage_seconds=60)
    produced: list[int] = []
    with database_locked():
        trainer = _trainer(sink, 40, produced)
        time.sleep(3)
        during, held = len(produced), sink.pending
        assert trainer.is_alive()  # paused in `metrics`, waiting for room
    trainer.join(30)

    assert (during, held) == (10, 10)
    assert sink.close(timeout=30) is True
    assert _steps(claimed_run) == list(range(1, 41))
    assert not sink.failed.is_set()
    assert sink.stats["paused"] >= 1 and sink.stats["paused_seconds"] >= 2
    assert sink.stats["dropped_events"] == 0


def test_a_long_outage_stops_the_run_with_a_clear_error_and_bounded_memory(claimed_run):
    sink = _bounded_sink(claimed_run, max_pending=5, outage_seconds=1.5)
    produced: list[int] = []
    with database_locked():
        started = time.monotonic()
        trainer = _trainer(sink, 1000, produced)
        assert sink.failed.wait(10)
        trainer.join(10)
        stopped_after = time.monotonic() - started
        held = sink.pending
        reason = sink.failure_reason()

    assert not trainer.is_alive()  # the training thread is not left waiting
    assert 1.5 <= stopped_after < 6
    assert held == 5
    assert reason == (
        "telemetry could not be written to the database for over 1.5 s (ENVLAB_TELEMETRY_OUTAGE_SECONDS); "
        "the run stopped rather than hold more in memory. Resume it once the database is back."
    )
    assert sink.stats["dropped_events"] == 995
    # Once the database is back, what was held is written, in order.
    assert sink.close(timeout=30) is True
    assert _steps(claimed_run) == [1, 2, 3, 4, 5]


def test_a_batch_that_keeps_failing_does_not_stop_the_heartbeat(claimed_run, monkeypatch, settings):
    # A lock timeout on the telemetry tables alone: SQLite locks the whole file, so it is
    # simulated here, raising what the driver raises; the heartbeat runs for real.
    import webapp.runs.telemetry.record as telemetry

    settings.ENVLAB_INTERRUPT_SECONDS = 1.0
    real = telemetry.telemetry_record
    locked = threading.Event()
    locked.set()

    def lock_timeout(**kwargs):
        if locked.is_set():
            raise OperationalError("canceling statement due to lock timeout")
        return real(**kwargs)

    monkeypatch.setattr(telemetry, "telemetry_record", lock_timeout)
    sink = TelemetrySink(
        run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2, publish=False
    )
    sink.metrics(1, {"reward": 0.5})
    time.sleep(2.5)

    swept = run_mark_stale_interrupted()
    claimed_run.refresh_from_db()
    assert swept == 0
    assert claimed_run.status == "running"
    assert timezone.now() - claimed_run.heartbeat_at < timedelta(seconds=1)
    assert not sink.lease_lost.is_set()
    assert sink.stats["db_errors"] >= 2
    assert _steps(claimed_run) == []

    locked.clear()
    assert sink.close(timeout=20) is True
    assert _steps(claimed_run) == [1]


def test_a_worker_that_lost_its_lease_writes_nothing_after_the_takeover(claimed_run, settings):
    # Worker A's sink beats once at start, then (a paused VM) not again for a minute.
    zombie = TelemetrySink(
        run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=60, publish=False
    )
    zombie.metrics(1, {"reward": 0.1})
    zombie.metrics(2, {"reward": 0.2})
    deadline = time.monotonic() + 10
    while _steps(claimed_run) != [1, 2] and time.monotonic() < deadline:
        time.sleep(0.1)
    # A's heartbeat went stale; worker B takes the run over and rewinds it to step 0.
    Run.objects.filter(pk=claimed_run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.ENVLAB_STALE_SECONDS + 1)
    )
    assert (
        run_claim(run_id=claimed_run.pk, lease_owner="lease-b", worker_name="w2").takeover is True
    )
    assert run_rewind(run_id=claimed_run.pk, lease_owner="lease-b", to_step=0) is True
    claimed_run.refresh_from_db()
    seq_after_takeover = claimed_run.last_seq

    # A wakes up and goes on recording its own timeline.
    zombie.metrics(3, {"reward": 0.3})
    zombie.rollouts([{"step": 3, "env": "echo", "messages": [], "rewards": {}, "reward": 0.3}])

    assert zombie.lease_lost.wait(10)
    zombie.metrics(4, {"reward": 0.4})
    zombie.close(timeout=10)
    assert _steps(claimed_run) == []
    assert Rollout.objects.filter(run=claimed_run).count() == 0
    claimed_run.refresh_from_db()
    assert (claimed_run.lease_owner, claimed_run.last_seq, claimed_run.step) == (
        "lease-b",
        seq_after_takeover,
        0,
    )
    assert zombie.stats["dropped_events"] == 3


def test_telemetry_record_refuses_a_writer_without_the_lease(claimed_run):
    before = Run.objects.values_list("last_seq", "step").get(pk=claimed_run.pk)
    for lease_owner in ("someone-else", ""):
        with pytest.raises(LeaseLost):
            telemetry_record(
                run_id=claimed_run.pk,
                lease_owner=lease_owner,
                events=[("metrics", (5, {"reward": 1.0}))],
            )
    Run.objects.filter(pk=claimed_run.pk).update(status="interrupted", lease_owner="")
    with pytest.raises(LeaseLost):
        telemetry_record(
            run_id=claimed_run.pk, lease_owner="lease-a", events=[("metrics", (5, {"reward": 1.0}))]
        )
    assert MetricPoint.objects.count() == 0
    assert Run.objects.values_list("last_seq", "step").get(pk=claimed_run.pk) == before


def test_closing_while_the_database_is_away_waits_up_to_the_outage_limit_then_fails_clearly(
    claimed_run, monkeypatch
):
    """The end of a run waits an outage out as training does, up to `outage_seconds` (then the
    runner ends the run interrupted), not a fixed while after which the rest is dropped silently.
    Simulated: every write is refused at once, as by a stopped server (tests/e2e/
    test_database_outage.py stops a real one; a lock here would hold each write for the
    busy timeout instead)."""
    import webapp.runs.telemetry.record as telemetry

    def refused(**kwargs):
        raise OperationalError("connection refused")

    sink = _bounded_sink(claimed_run, max_pending=100, outage_seconds=2.0)
    monkeypatch.setattr(telemetry, "telemetry_record", refused)
    for step in range(1, 4):
        sink.metrics(step, {"reward": step / 3})
    started = time.monotonic()
    written = sink.close(timeout=30)
    waited = time.monotonic() - started

    assert written is False
    assert 2.0 <= waited < 12
    assert sink.failed.is_set() and "ENVLAB_TELEMETRY_OUTAGE_SECONDS" in sink.failure
    assert sink.stats["db_errors"] >= 2
    assert _steps(claimed_run) == []
