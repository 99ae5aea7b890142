"""An external run (webapp/runs/external.py) follows its script's logs, not a worker's heartbeat:
beat's stale sweep leaves it alone past ENVLAB_INTERRUPT_SECONDS and interrupts it after
ENVLAB_EXTERNAL_STALE_SECONDS without a log; no worker can claim it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import RunFactory
from webapp.core.models import SweepWatch
from webapp.runs.external import external_run_create
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import run_claim
from worker.tasks import sweep_stale_runs

pytestmark = pytest.mark.django_db


def _quiet_for(run: Run, seconds: float) -> None:
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))


@pytest.fixture
def watched(settings):
    """The sweeper has watched the database long enough to trust stale heartbeats."""
    now = timezone.now()
    SweepWatch.objects.create(
        name="sweep_stale_runs", since=now - timedelta(seconds=settings.ENVLAB_INTERRUPT_SECONDS + 60), seen_at=now
    )


def test_the_sweep_interrupts_an_external_run_only_after_its_own_threshold(owner, settings, watched):
    settings.ENVLAB_EXTERNAL_STALE_SECONDS = 600
    quiet = external_run_create(owner=owner, data={"name": "quiet"})
    gone = external_run_create(owner=owner, data={"name": "gone"})
    _quiet_for(quiet, settings.ENVLAB_INTERRUPT_SECONDS + 60)  # a worker's run would be interrupted
    _quiet_for(gone, 601)

    sweep_stale_runs()

    quiet.refresh_from_db()
    gone.refresh_from_db()
    assert (quiet.status, bool(quiet.lease_owner)) == ("running", True)
    assert (gone.status, gone.lease_owner) == ("interrupted", "")
    assert gone.error == (
        "The script logged nothing for 600 seconds (ENVLAB_EXTERNAL_STALE_SECONDS): it stopped, or lost the lab."
    )
    assert list(RunEvent.objects.filter(run=gone).values_list("kind", flat=True)) == ["external_started", "interrupted"]
    sweep_stale_runs()
    assert RunEvent.objects.filter(run=gone).count() == 2


def test_no_worker_claims_an_external_run(owner, settings):
    run = external_run_create(owner=owner, data={"name": "mine"})
    lease = Run.objects.get(pk=run.pk).lease_owner
    _quiet_for(run, settings.ENVLAB_STALE_SECONDS + 5)  # stale enough for a takeover of a worker's run

    claim = run_claim(run_id=run.pk, lease_owner="worker", worker_name="w1")

    run.refresh_from_db()
    assert claim.outcome == "done"
    assert (run.status, run.lease_owner, run.worker_name, run.attempts) == ("running", lease, "", 1)


def test_a_workers_run_still_goes_by_the_interrupt_threshold(owner, settings, watched):
    settings.ENVLAB_EXTERNAL_STALE_SECONDS = 3600
    run = RunFactory(owner=owner, max_steps=10)
    run_claim(run_id=run.pk, lease_owner="a", worker_name="w")
    _quiet_for(run, settings.ENVLAB_INTERRUPT_SECONDS + 1)

    sweep_stale_runs()

    run.refresh_from_db()
    assert run.status == "interrupted"


def test_external_runs_take_no_share_of_the_work_quota(owner, settings):
    from webapp.core.quota import active_work, work_quota_check
    from webapp.runs.services import _quota_refusal

    settings.ENVLAB_MAX_ACTIVE_RUNS = 1
    settings.ENVLAB_MAX_ACTIVE_WORK = 1
    external_run_create(owner=owner, data={"name": "elsewhere"})

    assert active_work(owner) == {}
    work_quota_check(owner)  # raises when over
    assert _quota_refusal(owner) is None
    RunFactory(owner=owner, status=Run.Status.QUEUED)
    assert active_work(owner) == {"runs": 1}
