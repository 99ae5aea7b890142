"""Releasing pending sweep members into free quota slots: on a run's end (the runs app's
`run_ended`, after its commit) and from beat; idempotent, and pending runs count against no quota."""

from __future__ import annotations

import pytest

from tests.sweeps.conftest import GRID
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import run_claim, run_finish, run_request_cancel, run_slots_free
from webapp.sweeps.models import Sweep
from webapp.sweeps.services import sweep_create, sweep_release, sweeps_release_all

pytestmark = pytest.mark.django_db


@pytest.fixture
def sweep(owner, base, quota_of_two):
    return sweep_create(owner=owner, data={"name": "s", "base": base, "grid": GRID})


def _statuses(sweep):
    return list(Run.objects.filter(sweep_member__sweep=sweep).order_by("sweep_member__index").values_list("status", flat=True))


def test_a_run_that_ends_releases_the_next_pending_member(sweep, broker, django_capture_on_commit_callbacks):
    first = Run.objects.get(sweep_member__sweep=sweep, sweep_member__index=0)
    assert run_claim(run_id=first.pk, lease_owner="lease", worker_name="w").outcome == "claimed"
    with django_capture_on_commit_callbacks(execute=True):
        assert run_finish(run_id=first.pk, lease_owner="lease", status="succeeded", step=2)
    assert _statuses(sweep) == ["succeeded", "queued", "queued", "pending", "pending", "pending"]
    released = Run.objects.get(sweep_member__sweep=sweep, sweep_member__index=2)
    assert (released.sends, released.sent_at is not None) == (1, True)
    # Its task went to the real broker, once (the two queued at creation were sent at their commit,
    # which this test's transaction never reaches).
    assert broker.llen("train") == 1
    assert list(RunEvent.objects.filter(run=released).values_list("kind", "message", "data")) == [
        ("pending", f"Pending in sweep 's' (#{sweep.pk}): queued when a slot of your quota is free.", {}),
        ("queued", f"Queued from sweep 's' (#{sweep.pk}, member 2): a slot of your quota was free.",
         {"sweep": sweep.pk, "member": 2}),
    ]
    # Released again (beat, a second receiver): no slot is free, nothing more is queued.
    assert sweep_release(owner_id=sweep.owner_id) == []
    assert sweep_release(owner_id=sweep.owner_id) == []
    assert _statuses(sweep) == ["succeeded", "queued", "queued", "pending", "pending", "pending"]
    assert RunEvent.objects.filter(run__sweep_member__sweep=sweep, kind="queued").count() == 3


def test_release_twice_after_slots_free_queues_each_member_once(sweep):
    # Two runs ended without their end being announced (a receiver that failed): beat's release.
    Run.objects.filter(sweep_member__sweep=sweep, sweep_member__index__in=[0, 1]).update(status="failed")
    ids = list(Run.objects.filter(sweep_member__sweep=sweep).order_by("sweep_member__index").values_list("pk", flat=True))
    assert sweeps_release_all() == ids[2:4]
    assert sweep_release(owner_id=sweep.owner_id) == []
    assert sweeps_release_all() == []
    assert _statuses(sweep) == ["failed", "failed", "queued", "queued", "pending", "pending"]
    assert RunEvent.objects.filter(run_id__in=ids[2:4], kind="queued").count() == 2


def test_pending_runs_count_against_no_quota_and_a_cancel_frees_a_slot(
    sweep, owner, broker, django_capture_on_commit_callbacks
):
    # Two queued count; four pending do not.
    assert run_slots_free(owner) == 0
    queued = Run.objects.get(sweep_member__sweep=sweep, sweep_member__index=1)
    with django_capture_on_commit_callbacks(execute=True):
        run_request_cancel(run=queued)
    assert _statuses(sweep) == ["queued", "cancelled", "queued", "pending", "pending", "pending"]
    assert broker.llen("train") == 1
    # A pending member cancelled on its own frees nothing and releases nothing.
    pending = Run.objects.get(sweep_member__sweep=sweep, sweep_member__index=5)
    with django_capture_on_commit_callbacks(execute=True):
        run_request_cancel(run=pending)
    assert _statuses(sweep) == ["queued", "cancelled", "queued", "pending", "pending", "cancelled"]
    assert broker.llen("train") == 1
    assert list(RunEvent.objects.filter(run=pending).values_list("kind", flat=True)) == ["pending", "cancelled"]


def test_the_work_quota_bounds_a_release_too(owner, base, settings):
    settings.ENVLAB_MAX_ACTIVE_RUNS = 4
    settings.ENVLAB_MAX_ACTIVE_WORK = 1
    sweep = sweep_create(owner=owner, data={"name": "s", "base": base, "grid": {"grpo.seed": [0, 1, 2]}})
    assert _statuses(sweep) == ["queued", "pending", "pending"]


def test_a_sweep_is_done_when_its_last_member_ends(sweep):
    Run.objects.filter(sweep_member__sweep=sweep).update(status="succeeded")
    assert sweep_release(owner_id=sweep.owner_id) == []
    sweep.refresh_from_db()
    assert (sweep.status, sweep.finished_at is not None) == (Sweep.Status.DONE, True)


def test_a_release_that_fails_on_a_runs_end_fails_not_the_end_and_beat_catches_up(
    sweep, broker, monkeypatch, django_capture_on_commit_callbacks
):
    from django.db import OperationalError

    def database_away(**kwargs):
        raise OperationalError("the database went away")

    monkeypatch.setattr("webapp.sweeps.receivers.sweep_release", database_away)
    first = Run.objects.get(sweep_member__sweep=sweep, sweep_member__index=0)
    run_claim(run_id=first.pk, lease_owner="lease", worker_name="w")
    with django_capture_on_commit_callbacks(execute=True):
        assert run_finish(run_id=first.pk, lease_owner="lease", status="succeeded", step=2) is True
    assert _statuses(sweep) == ["succeeded", "queued", "pending", "pending", "pending", "pending"]
    # Beat's round.
    assert sweeps_release_all() == [Run.objects.get(sweep_member__sweep=sweep, sweep_member__index=2).pk]
    assert _statuses(sweep) == ["succeeded", "queued", "queued", "pending", "pending", "pending"]
