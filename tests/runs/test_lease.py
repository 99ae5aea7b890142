"""The run lease: one conditional UPDATE decides who trains; stale heartbeats are taken over."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import RunFactory
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent
from webapp.runs.services import (
    run_claim,
    run_finish,
    run_heartbeat,
    run_mark_stale_interrupted,
    run_request_cancel,
    run_resume,
    run_rewind,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner):
    return RunFactory(owner=owner, name="r", max_steps=10)


def test_first_claim_wins_and_a_duplicate_is_busy(run):
    first = run_claim(run_id=run.pk, lease_owner="a", worker_name="w1")
    second = run_claim(run_id=run.pk, lease_owner="b", worker_name="w2")
    assert (first.outcome, first.takeover) == ("claimed", False)
    assert second.outcome == "busy"
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.worker_name, run.attempts) == ("running", "a", "w1", 1)


def test_stale_heartbeat_is_taken_over(run, settings):
    run_claim(run_id=run.pk, lease_owner="a", worker_name="w1")
    Run.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.ENVLAB_STALE_SECONDS + 1)
    )
    claim = run_claim(run_id=run.pk, lease_owner="b", worker_name="w2")
    assert (claim.outcome, claim.takeover) == ("claimed", True)
    run.refresh_from_db()
    assert (run.lease_owner, run.attempts) == ("b", 2)
    # The old holder has lost the lease: its heartbeat and its finish change nothing.
    assert run_heartbeat(run_id=run.pk, lease_owner="a", step=9) == (False, False)
    assert run_finish(run_id=run.pk, lease_owner="a", status="succeeded") is False
    run.refresh_from_db()
    assert (run.status, run.step) == ("running", 0)
    assert list(RunEvent.objects.filter(run=run).values_list("kind", flat=True)) == [
        "claimed",
        "taken_over",
    ]


def test_a_claim_at_the_staleness_boundary_is_a_takeover_or_nothing(run, monkeypatch):
    """The clock read a little later for each question (as it is): a heartbeat that goes stale
    between two readings made a takeover look like a first claim (CI: a killed worker's run
    resumed with a 'claimed' event and no 'taken_over')."""
    from webapp.core import leases

    run_claim(run_id=run.pk, lease_owner="a", worker_name="w1")
    beat = Run.objects.get(pk=run.pk).heartbeat_at
    readings = iter([beat - timedelta(milliseconds=2), beat - timedelta(milliseconds=1)])
    later = beat + timedelta(milliseconds=1)
    monkeypatch.setattr(leases, "stale_before", lambda seconds=None: next(readings, later))

    claim = run_claim(run_id=run.pk, lease_owner="b", worker_name="w2")
    assert claim.outcome == "busy"  # not stale at this claim's one cutoff: not claimed at all
    claim = run_claim(run_id=run.pk, lease_owner="b", worker_name="w2")
    assert (claim.outcome, claim.takeover) == ("claimed", True)
    assert list(RunEvent.objects.filter(run=run).values_list("kind", flat=True)) == ["claimed", "taken_over"]


def test_finished_runs_are_not_claimed(run):
    run_claim(run_id=run.pk, lease_owner="a", worker_name="w1")
    assert run_finish(run_id=run.pk, lease_owner="a", status="succeeded", step=10) is True
    assert run_claim(run_id=run.pk, lease_owner="b", worker_name="w2").outcome == "done"
    run.refresh_from_db()
    assert (run.status, run.step, run.lease_owner) == ("succeeded", 10, "")


def test_rewind_forgets_steps_after_the_checkpoint(run):
    run_claim(run_id=run.pk, lease_owner="a", worker_name="w1")
    for step in (1, 2, 3, 4):
        MetricPoint.objects.create(run=run, step=step, key="reward", value=step, seq=step)
        Rollout.objects.create(run=run, step=step, seq=10 + step)
    assert run_rewind(run_id=run.pk, lease_owner="a", to_step=2) is True
    assert sorted(MetricPoint.objects.filter(run=run).values_list("step", flat=True)) == [1, 2]
    assert sorted(Rollout.objects.filter(run=run).values_list("step", flat=True)) == [1, 2]
    run.refresh_from_db()
    assert (run.step, run.checkpoint_step) == (2, 2)
    assert run_rewind(run_id=run.pk, lease_owner="someone-else", to_step=0) is False
    assert MetricPoint.objects.filter(run=run).count() == 2


def test_heartbeat_reports_cancel(run):
    run_claim(run_id=run.pk, lease_owner="a", worker_name="w1")
    assert run_heartbeat(run_id=run.pk, lease_owner="a", step=3) == (True, False)
    run_request_cancel(run=run)
    assert run_heartbeat(run_id=run.pk, lease_owner="a", step=4) == (True, True)
    run.refresh_from_db()
    assert (run.status, run.step, run.cancel_requested) == ("running", 4, True)


def test_cancel_a_queued_run_is_immediate(run):
    run_request_cancel(run=run)
    run.refresh_from_db()
    assert (run.status, run.cancel_requested) == ("cancelled", False)
    assert run.finished_at is not None


def test_stale_runs_become_interrupted_and_resume(
    run, settings, django_capture_on_commit_callbacks
):
    run_claim(run_id=run.pk, lease_owner="a", worker_name="w1")
    Run.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.ENVLAB_STALE_SECONDS + 1)
    )
    # Stale enough to take over, not yet to give up on: the redelivery gets the first chance.
    assert run_mark_stale_interrupted() == 0
    Run.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.ENVLAB_INTERRUPT_SECONDS + 1)
    )
    assert run_mark_stale_interrupted() == 1
    run.refresh_from_db()
    assert (run.status, run.lease_owner) == ("interrupted", "")
    assert run_mark_stale_interrupted() == 0
    import redis

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    with django_capture_on_commit_callbacks(execute=True):
        run_resume(run=run)
    broker.delete("train")  # no worker in this test; the message itself is checked in e2e
    run.refresh_from_db()
    assert (run.status, run.error, run.finished_at) == ("queued", "", None)
