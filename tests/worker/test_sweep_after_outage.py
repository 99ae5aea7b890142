"""Beat's sweep after a database outage (issue 23 item 5): every running run's heartbeat went
stale while the database was away, because no worker could renew it. The first sweeps after
it mark nothing; the workers renew within a second or two; only a run whose worker stays
silent for ENVLAB_INTERRUPT_SECONDS of watching is marked interrupted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import RunFactory
from webapp.core.models import SweepWatch
from webapp.runs.models import Run
from webapp.runs.services import run_claim, run_heartbeat
from worker.tasks import sweep_stale_runs

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _sweep_timing(settings):
    """Every test here: a run's worker must stay silent 16 s of watching, and beat sweeps every 2 s."""
    settings.ENVLAB_INTERRUPT_SECONDS, settings.ENVLAB_SWEEP_SECONDS = 16.0, 2.0


def _running(owner, lease: str, heartbeat_age: float) -> Run:
    run = RunFactory(owner=owner, name=lease, max_steps=10)
    run_claim(run_id=run.pk, lease_owner=lease, worker_name="w")
    Run.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age)
    )
    return run


def _watch(*, since_age: float, seen_age: float) -> None:
    now = timezone.now()
    SweepWatch.objects.update_or_create(
        name="sweep_stale_runs",
        defaults={
            "since": now - timedelta(seconds=since_age),
            "seen_at": now - timedelta(seconds=seen_age),
        },
    )


def test_the_first_sweeps_after_an_outage_trust_no_stale_heartbeat(owner):
    # Swept every 2 s for an hour, then the database was away for 40 s.
    _watch(since_age=3600, seen_age=40)
    alive = _running(owner, "alive", heartbeat_age=41)
    dead = _running(owner, "dead", heartbeat_age=41)

    assert sweep_stale_runs() == 0
    assert list(Run.objects.order_by("pk").values_list("status", flat=True)) == [
        "running",
        "running",
    ]
    watch = SweepWatch.objects.get()
    assert timezone.now() - watch.since < timedelta(seconds=5)

    # The live worker's heartbeat thread renews; the dead one's never does. Once the sweeper
    # has watched for ENVLAB_INTERRUPT_SECONDS without a gap, the dead run is interrupted.
    assert run_heartbeat(run_id=alive.pk, lease_owner="alive") == (True, False)
    _watch(since_age=17, seen_age=1)
    assert sweep_stale_runs() == 1
    alive.refresh_from_db()
    dead.refresh_from_db()
    assert (alive.status, alive.lease_owner) == ("running", "alive")
    assert (dead.status, dead.lease_owner) == ("interrupted", "")


def test_a_sweeper_that_watched_without_a_gap_marks_a_silent_run_at_once(owner):
    _watch(since_age=3600, seen_age=2)
    dead = _running(owner, "dead", heartbeat_age=20)
    fresh = _running(owner, "fresh", heartbeat_age=3)

    assert sweep_stale_runs() == 1
    assert Run.objects.get(pk=dead.pk).status == "interrupted"
    assert Run.objects.get(pk=fresh.pk).status == "running"


def test_the_very_first_sweep_waits_too(owner):
    """Beat (re)started: it has not seen the database before, so it cannot tell either."""
    dead = _running(owner, "dead", heartbeat_age=600)

    assert sweep_stale_runs() == 0
    assert Run.objects.get(pk=dead.pk).status == "running"
    assert SweepWatch.objects.count() == 1
