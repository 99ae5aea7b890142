"""The fields every piece of leased work shares (webapp.core.leases): runs, evaluations and
background jobs. Abstract: each app's table keeps its own columns, with no migration."""

from __future__ import annotations

from django.db import models


class LeasedWork(models.Model):
    """A row one worker claims and renews: who holds it, when they last proved alive, how
    often it was claimed, and when it started and ended. Subclasses define `Status` (with
    QUEUED and RUNNING) and `ACTIVE`."""

    ACTIVE: tuple[str, ...] = ()

    error = models.TextField(blank=True, default="")
    lease_owner = models.CharField(max_length=64, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def is_active(self) -> bool:
        return getattr(self, "status", None) in self.ACTIVE


class ClaimedWork(LeasedWork):
    """Leased work sent as a Celery message (runs, evaluations): the worker that holds it,
    the task id of the message that claimed it (its redelivery may take the row over; any
    other copy has nothing to do), and the owner's request to stop."""

    worker_name = models.CharField(max_length=200, blank=True, default="")
    claim_task_id = models.CharField(max_length=64, blank=True, default="")
    cancel_requested = models.BooleanField(default=False)

    class Meta(LeasedWork.Meta):
        abstract = True


class SweepWatch(models.Model):
    """How long a sweeper has seen the database without a gap (webapp.core.leases.sweep_watch):
    a heartbeat that went stale while the database was away proves nothing about its worker."""

    name = models.CharField(max_length=64, unique=True)
    since = models.DateTimeField()  # the first sweep after the last gap
    seen_at = models.DateTimeField()  # the latest sweep

    def __str__(self) -> str:
        return f"{self.name}: watching since {self.since:%Y-%m-%d %H:%M:%S}"
