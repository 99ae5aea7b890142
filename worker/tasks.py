"""Celery tasks: thin, idempotent, taking ids. Training code is imported inside the task."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import django
from celery import shared_task

log = logging.getLogger(__name__)


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.local")
    django.setup()


def _claim_when_free(claim: Callable[[], Any]) -> Any:
    """Call `claim` (a run, evaluation or job claim) until its outcome is not "busy" or "full":
    a redelivered message waits while the holder's lease is alive, and takes the work over
    once it is stale; a run whose environment's sessions are held by running runs waits for
    them to end. Returns the last claim: "claimed", "done" or (runs, evaluations) "duplicate"."""
    from django.conf import settings

    while True:
        result = claim()
        if result.outcome not in ("busy", "full"):
            return result
        time.sleep(settings.ENVLAB_HEARTBEAT_SECONDS)


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@shared_task(
    bind=True, name="worker.tasks.train_run", acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def train_run(self: Any, run_id: int) -> str:
    """Claim the run's lease and train it; any other delivery does nothing.

    The redelivery of the message that claimed the run (its worker was lost) polls while
    the lease looks alive: if the heartbeat goes stale the claim takes the run over and
    continues from its last checkpoint; if the run ends meanwhile there is nothing left to
    do. Another copy of the message (beat re-sends queued runs) returns at once.
    """
    _setup_django()
    from webapp.runs.services import new_lease_owner, run_claim

    lease_owner, worker_name, task_id = new_lease_owner(), _worker_name(), str(self.request.id or "")
    claim = _claim_when_free(
        lambda: run_claim(run_id=run_id, lease_owner=lease_owner, worker_name=worker_name, task_id=task_id)
    )
    if claim.outcome == "duplicate":
        log.info("run %s: claimed by another message; this copy has nothing to do", run_id)
        return "duplicate"
    if claim.outcome == "done":
        log.info("run %s: nothing to do (%s)", run_id, claim.run.status if claim.run else "missing")
        return "done"

    from worker.celery_app import CURRENT_RUN
    from worker.training.runner import train  # torch, transformers, trl load here, in the child

    CURRENT_RUN["id"] = run_id
    try:
        return train(run_id=run_id, lease_owner=lease_owner, worker_name=worker_name)
    finally:
        CURRENT_RUN["id"] = None


@shared_task(
    bind=True, name="worker.tasks.evaluate", acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def evaluate(self: Any, evaluation_id: int) -> str:
    """Claim the evaluation's lease and play it (the runs' lease pattern: a redelivery
    waits while the lease is alive and takes over once it is stale; a copy finds it done)."""
    _setup_django()
    from webapp.evaluations.services import evaluation_claim, new_lease_owner

    lease_owner, worker_name, task_id = new_lease_owner(), _worker_name(), str(self.request.id or "")
    claim = _claim_when_free(
        lambda: evaluation_claim(
            evaluation_id=evaluation_id, lease_owner=lease_owner, worker_name=worker_name, task_id=task_id
        )
    )
    if claim.outcome != "claimed":
        return str(claim.outcome)

    from worker.play.evaluation import (
        evaluate as play,  # torch and transformers load here, in the child
    )

    return play(evaluation_id=evaluation_id, lease_owner=lease_owner)


@shared_task(
    bind=True, name="worker.tasks.run_job", acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def run_job(self: Any, job_id: int) -> str:
    """Claim a background job (worker/play/jobs.py: a reward dry run, ...) and do it; the runs' lease pattern."""
    _setup_django()
    from webapp.jobs.services import job_claim, new_lease_owner

    lease_owner = new_lease_owner()
    claim = _claim_when_free(lambda: job_claim(job_id=job_id, lease_owner=lease_owner))
    if claim.outcome != "claimed":
        return str(claim.outcome)

    from worker.play.jobs import run_job as work  # torch loads here, in the child

    return work(job_id=job_id, lease_owner=lease_owner)


@shared_task(name="worker.tasks.sweep_stale_runs", ignore_result=True)
def sweep_stale_runs() -> int:
    _setup_django()
    from django.conf import settings

    from webapp.core.leases import heartbeats_are_evidence, sweep_watch
    from webapp.evaluations.services import evaluation_mark_stale_failed
    from webapp.jobs.services import jobs_mark_stale_failed
    from webapp.runs.external import external_runs_mark_stale
    from webapp.runs.services import run_mark_stale_interrupted

    # Heartbeats that went stale while the database was away (this sweep could not run either)
    # say nothing of their workers: wait until they have had time to renew them.
    watching = sweep_watch(name="sweep_stale_runs", period_seconds=settings.ENVLAB_SWEEP_SECONDS)
    if not heartbeats_are_evidence(watching):
        log.info("stale sweep: watching the database since %s; no heartbeat is trusted yet", watching)
        return 0
    # Evaluations and jobs whose worker died, too: reads never write, this sweep is the one place.
    evaluation_mark_stale_failed()
    jobs_mark_stale_failed()
    external_runs_mark_stale()
    return run_mark_stale_interrupted()


@shared_task(name="worker.tasks.requeue_unclaimed_runs", ignore_result=True)
def requeue_unclaimed_runs() -> int:
    """Re-send queued runs that no worker claimed, and pending notifications (beat, every minute)."""
    _setup_django()
    from webapp.runs.services import run_requeue_unclaimed
    from webapp.runs.telemetry.notify import run_notifications_resend

    # Notifications whose task never reached the broker, too (their rows stay pending).
    run_notifications_resend()
    return run_requeue_unclaimed()


@shared_task(name="worker.tasks.release_sweeps", ignore_result=True)
def release_sweeps() -> int:
    """Queue pending sweep members into free quota slots (beat; a run's end does it at once)."""
    _setup_django()
    from webapp.sweeps.services import sweeps_release_all

    return len(sweeps_release_all())


@shared_task(name="worker.tasks.recheck_environments", ignore_result=True)
def recheck_environments() -> int:
    """Re-probe the catalog's environments (beat, on the light `default` queue)."""
    _setup_django()
    from django.conf import settings

    from webapp.catalog.services import environments_recheck

    return environments_recheck(older_than_seconds=settings.ENVLAB_RECHECK_SECONDS / 2)


@shared_task(name="worker.tasks.supervise_bundled", ignore_result=True)
def supervise_bundled() -> list[str]:
    """Restart bundled environment servers whose process is gone (beat, every few seconds)."""
    _setup_django()
    from webapp.catalog.bundled import bundled_supervise

    actions = bundled_supervise()
    for action in actions:
        log.info("bundled servers: %s", action)
    return actions


@shared_task(name="worker.tasks.send_run_notification", acks_late=True, ignore_result=True)
def send_run_notification(notification_id: int) -> str:
    """Send one run notification through apprise (light `default` queue; webapp/runs/telemetry/notify.py).
    A redelivered or repeated message sends nothing: only the task that takes the pending row sends."""
    _setup_django()
    from webapp.runs.telemetry.notify import run_notification_send

    return run_notification_send(notification_id=notification_id)
