"""Reads for runs: who sees what, metric series downsampled, rollouts by sequence."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from webapp.runs.models import MetricPoint, Rollout, Run


def runs_visible_to(*, user: AbstractBaseUser | Any) -> QuerySet[Run]:
    """A run is its owner's; users with the permission runs.view_run (or change_run) see all.

    Permissions, not `is_staff`: a staff account that may only open the admin reads nobody's
    transcripts. Everyone else gets a 404, as if the run did not exist.
    """
    runs = Run.objects.select_related("owner")
    if not (getattr(user, "is_authenticated", False) and getattr(user, "is_active", False)):
        return runs.none()
    if user.has_perm("runs.view_run") or user.has_perm("runs.change_run"):
        return runs
    return runs.filter(owner=user)


def run_can_change(*, user: AbstractBaseUser | Any, run: Run) -> bool:
    """Cancel and resume: the run's owner, or a user with the permission runs.change_run."""
    if not (getattr(user, "is_authenticated", False) and getattr(user, "is_active", False)):
        return False
    return run.owner_id == user.pk or user.has_perm("runs.change_run")


RUN_CHANGE_REFUSAL = (
    "only the run's owner, or a user with the permission runs.change_run, may cancel or resume it"
)


def downsample(points: list[tuple[int, float]], max_points: int) -> list[tuple[int, float]]:
    """Keep at most max_points, evenly spread, always keeping the first and the last."""
    n = len(points)
    if n <= max_points:
        return points
    if max_points == 1:
        return [points[-1]]
    stride = (n - 1) / (max_points - 1)
    return [points[round(i * stride)] for i in range(max_points)]


def run_metric_keys(*, run: Run) -> list[str]:
    return list(
        MetricPoint.objects.filter(run=run).values_list("key", flat=True).distinct().order_by("key")
    )


def run_metric_series(
    *, run: Run, keys: list[str] | None, max_points: int = 500
) -> dict[str, list[list[float]]]:
    rows = MetricPoint.objects.filter(run=run)
    if keys:
        rows = rows.filter(key__in=keys)
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for key, step, value in rows.order_by("key", "step").values_list("key", "step", "value"):
        if value is not None:
            series[key].append((step, value))
    return {key: [[s, v] for s, v in downsample(points, max_points)] for key, points in series.items()}


def run_rollouts(
    *,
    run: Run,
    step: int | None = None,
    env: str | None = None,
    after_seq: int | None = None,
) -> QuerySet[Rollout]:
    rows = Rollout.objects.filter(run=run).order_by("seq")
    if step is not None:
        rows = rows.filter(step=step)
    if env:
        rows = rows.filter(env=env)
    if after_seq is not None:
        rows = rows.filter(seq__gt=after_seq)
    return rows


def run_progress(*, run: Run) -> dict[str, Any]:
    """Step, elapsed seconds and an ETA from the average step time so far."""
    from django.utils import timezone

    elapsed = None
    eta = None
    if run.started_at:
        end = run.finished_at or timezone.now()
        elapsed = max(0.0, (end - run.started_at).total_seconds())
        if run.is_active and run.step > 0:
            eta = elapsed / run.step * max(0, run.max_steps - run.step)
    return {"step": run.step, "max_steps": run.max_steps, "elapsed_seconds": elapsed, "eta_seconds": eta}
