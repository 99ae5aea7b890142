"""Reads for jobs: a job is its owner's alone."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from webapp.core.users import is_signed_in
from webapp.jobs.models import Job


def jobs_visible_to(*, user: Any) -> QuerySet[Job]:
    if not is_signed_in(user):
        return Job.objects.none()
    return Job.objects.filter(owner=user)


def job_out(job: Job) -> dict[str, Any]:
    """The API shape (shared/docs/design.md): {id, kind, status, progress, result, error}."""
    total = job.progress_total
    return {
        "id": job.pk,
        "kind": job.kind,
        "status": job.status,
        "progress": {
            "done": job.progress_done,
            "total": total,
            "fraction": round(job.progress_done / total, 4) if total else None,
        },
        "result": job.result,
        "error": job.error,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
    }
