"""Sweeps: one base run config, the values some of its fields take, and the runs made of them."""

from __future__ import annotations

from django.conf import settings
from django.db import models

NAME_MAX_LENGTH = 120


class Sweep(models.Model):
    class Method(models.TextChoices):
        GRID = "grid", "Grid (every combination)"
        RANDOM = "random", "Random (count combinations, drawn with a seed)"

    class Status(models.TextChoices):
        # Some member has not ended (pending, queued or running).
        ACTIVE = "active", "Active"
        # Every member ended.
        DONE = "done", "Done"
        # Its owner cancelled the members still pending; running ones went on.
        CANCELLED = "cancelled", "Rest cancelled"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sweeps")
    # Also the `group` of its runs.
    name = models.CharField(max_length=NAME_MAX_LENGTH)
    # The run config as given, and {dotted path: [values]} (webapp/sweeps/grid.py).
    base = models.JSONField()
    grid = models.JSONField()
    # The grid's paths in the order given: PostgreSQL's jsonb keeps no key order.
    paths = models.JSONField(default=list)
    method = models.CharField(max_length=8, choices=Method.choices, default=Method.GRID)
    # Random sweeps: how many members were drawn, and the seed they were drawn with.
    count = models.PositiveIntegerField(null=True, blank=True)
    seed = models.BigIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"sweep #{self.pk} {self.name} ({self.status})"


class SweepMember(models.Model):
    """One run of a sweep: its place in the sweep and the values the sweep set in its config."""

    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="members")
    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="sweep_member")
    index = models.PositiveIntegerField()
    # {dotted path: value}: what this member's config was given over the base.
    params = models.JSONField(default=dict)

    class Meta:
        ordering = ["sweep", "index"]
        constraints = [models.UniqueConstraint(fields=["sweep", "index"], name="sweep_member_unique_index")]

    def __str__(self) -> str:
        return f"member {self.index} of sweep {self.sweep_id} (run {self.run_id})"
