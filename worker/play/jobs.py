"""The kinds of background job (webapp/jobs) and the function that does each.

`run_job` claims nothing itself (worker.tasks.run_job holds the lease); it looks the kind up,
imports its module (torch loads there, in the worker child) and records the outcome. A new
kind adds one entry: `"kind": "module:function"`, the function taking `(job, lease_owner)`
and returning the job's result (a JSON-able dict), raising `LeaseLost` when the lease went.
"""

from __future__ import annotations

import importlib
import logging
import traceback
from collections.abc import Callable
from typing import Any

from webapp.jobs.models import Job
from webapp.jobs.services import job_finish, job_heartbeat
from webapp.settings.env import env_int

log = logging.getLogger(__name__)

KINDS: dict[str, str] = {
    "dry_run": "worker.play.dry_run:dry_run",
    "learnability": "worker.play.learnability:learnability",
    "rescore": "worker.play.rescore:rescore",
    "preview": "worker.play.preview:preview",
    "hub_push": "worker.play.hub_push:hub_push",
}


class LeaseLost(Exception):
    """The job's lease went to another worker (or the job was swept): stop, record nothing."""


def job_progress(job: Job, lease_owner: str, done: int) -> None:
    """Record that `done` items of the job are done, which renews its lease; LeaseLost when
    the lease is no longer this worker's, so the job stops before doing more."""
    if not job_heartbeat(job_id=job.pk, lease_owner=lease_owner, done=done):
        raise LeaseLost


def job_function(kind: str) -> Callable[[Job, str], dict[str, Any]]:
    target = KINDS.get(kind)
    if target is None:
        raise ValueError(f"unknown job kind '{kind}'")
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def run_job(*, job_id: int, lease_owner: str) -> str:
    import torch

    torch.set_num_threads(env_int("ENVLAB_TORCH_THREADS", 1))
    job = Job.objects.select_related("owner").get(pk=job_id)
    try:
        result = job_function(job.kind)(job, lease_owner)
    except LeaseLost:
        return "lease_lost"
    except Exception as exc:
        log.exception("job %s failed", job_id)
        job_finish(job_id=job_id, lease_owner=lease_owner,
                   error="".join(traceback.format_exception_only(type(exc), exc)).strip()[:4000])
        return "failed"
    job_finish(job_id=job_id, lease_owner=lease_owner, result=result)
    return "succeeded"
