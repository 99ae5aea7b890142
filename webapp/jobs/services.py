"""Writes for background jobs: create (enqueued by name on commit), claim, progress, finish,
and the sweep that fails jobs whose worker stopped renewing the lease."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from webapp.core import leases
from webapp.core.quota import lock_owner, work_quota_check
from webapp.jobs.models import Job

log = logging.getLogger(__name__)

# Enqueued by name: webapp code does not import the worker. Jobs that play a model need the
# training worker's libraries, so they share its CPU queue.
JOB_TASK = "worker.tasks.run_job"
JOB_QUEUE = "train"


def job_create(*, owner: User, kind: str, params: dict[str, Any], total: int) -> Job:
    """Queue a job; WorkQuotaExceeded (a 400), writing nothing, past the owner's quota."""
    with transaction.atomic():
        lock_owner(owner)
        work_quota_check(owner)
        job = Job.objects.create(owner=owner, kind=kind, params=params, progress_total=total)
        job_id = job.pk
        transaction.on_commit(lambda: _send(job_id))
    return job


def _send(job_id: int) -> None:
    from kombu.exceptions import OperationalError

    from webapp import celery_app

    try:
        celery_app.send_task(JOB_TASK, args=(job_id,), queue=JOB_QUEUE)
    except (OperationalError, OSError) as exc:
        # Nothing re-sends a job: say so rather than leave it queued forever.
        log.warning("job %s: the broker is unreachable (%s)", job_id, exc)
        Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
            status=Job.Status.FAILED, error="The broker was unreachable; start the job again.",
            finished_at=timezone.now(),
        )


@dataclass(frozen=True)
class Claim:
    outcome: str  # "claimed", "busy" (another worker holds a live lease), "done"


def job_claim(*, job_id: int, lease_owner: str) -> Claim:
    """queued -> running, or a running job whose heartbeat went stale taken over."""
    now = timezone.now()
    changed = Job.objects.filter(leases.claimable(Job), pk=job_id).update(
        status=Job.Status.RUNNING, lease_owner=lease_owner, heartbeat_at=now, attempts=F("attempts") + 1,
        started_at=now,
    )
    if changed:
        return Claim("claimed")
    return Claim(leases.claim_refused(Job.objects.filter(pk=job_id).first()))


def job_heartbeat(*, job_id: int, lease_owner: str, done: int | None = None) -> bool:
    fields: dict[str, Any] = {} if done is None else {"progress_done": done}
    return leases.renew(Job, pk=job_id, lease_owner=lease_owner, **fields)[0]


def job_finish(*, job_id: int, lease_owner: str, result: dict[str, Any] | None = None, error: str = "") -> bool:
    status = Job.Status.FAILED if error else Job.Status.SUCCEEDED
    return bool(
        leases.held(Job, pk=job_id, lease_owner=lease_owner).update(
            status=status, result=result, error=error[:10_000], finished_at=timezone.now(), lease_owner=""
        )
    )


def jobs_mark_stale_failed() -> int:
    """Running jobs whose worker stopped renewing the lease, and nobody took over, fail."""
    return Job.objects.filter(status=Job.Status.RUNNING, heartbeat_at__lt=leases.interrupt_before()).update(
        status=Job.Status.FAILED, lease_owner="", finished_at=timezone.now(),
        error="The worker stopped sending heartbeats; start the job again.",
    )


new_lease_owner = leases.new_lease_owner
