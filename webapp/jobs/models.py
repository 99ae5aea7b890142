"""Background jobs that are not training runs (reward dry runs, re-scoring): one row each,
claimed and renewed like a run's lease, so a dead worker's job does not stay "running"."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.core.models import LeasedWork


class Job(LeasedWork):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=32)
    # What the job works on, validated and pinned when it was created.
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)

    def __str__(self) -> str:
        return f"job #{self.pk} {self.kind} ({self.status})"
