"""Reads for runs: who sees what, metric series downsampled, rollouts by sequence."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Prefetch, QuerySet

from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent


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


def run_metric_keys(*, run: Run) -> list[str]:
    return list(
        MetricPoint.objects.filter(run=run).values_list("key", flat=True).distinct().order_by("key")
    )


def run_metric_series(
    *, run: Run, keys: list[str] | None, max_points: int = 500
) -> dict[str, list[list[float]]]:
    """Each key's non-null points as `[step, value]`, by step, at most max_points of them.

    A longer series is cut into step buckets, each keeping its lowest and its highest point
    where they occur, plus the series' first and last point: a one-step spike on a 100k-step
    run still shows. The buckets are picked in SQL on the (run, key, step, value) index, so
    no more than the returned points reach Python, whatever the run's length (security
    review L2). Keys are listed by the database's order; unknown keys are left out.
    """
    wanted = sorted(set(keys)) if keys else _metric_keys_logged(run_id=run.pk)
    series: dict[str, list[list[float]]] = {}
    with connection.cursor() as cursor:
        for key in wanted:
            points = _metric_points(cursor, run_id=run.pk, key=key, max_points=max_points)
            if points:
                series[key] = [[step, value] for step, value in points]
    return series


def _metric_sql(sql: str) -> str:
    """`sql` with `{table}` and `{key}` / `{value}` quoted for this database."""
    quote = connection.ops.quote_name
    return sql.format(
        table=quote(MetricPoint._meta.db_table), key=quote("key"), value=quote("value")
    )


def _metric_keys_logged(*, run_id: int) -> list[str]:
    """The run's metric keys by a loose index scan: one index seek per key, where DISTINCT
    would walk every point of the run."""
    with connection.cursor() as cursor:
        cursor.execute(
            _metric_sql(
                "WITH RECURSIVE logged(k) AS ("
                " SELECT MIN({key}) FROM {table} WHERE run_id = %s"
                " UNION ALL"
                " SELECT (SELECT MIN(m.{key}) FROM {table} m WHERE m.run_id = %s AND m.{key} > logged.k)"
                " FROM logged WHERE logged.k IS NOT NULL"
                ") SELECT k FROM logged WHERE k IS NOT NULL"
            ),
            [run_id, run_id],
        )
        return [key for (key,) in cursor.fetchall()]


def _metric_points(
    cursor: Any, *, run_id: int, key: str, max_points: int
) -> list[tuple[int, float]]:
    of_key = "run_id = %s AND {key} = %s AND {value} IS NOT NULL"
    cursor.execute(
        _metric_sql(f"SELECT COUNT(*) FROM (SELECT 1 FROM {{table}} WHERE {of_key} LIMIT %s) head"),
        [run_id, key, max_points + 1],
    )
    (counted,) = cursor.fetchone()
    if counted <= max_points:
        cursor.execute(
            _metric_sql(f"SELECT step, {{value}} FROM {{table}} WHERE {of_key} ORDER BY step"),
            [run_id, key],
        )
        return cursor.fetchall()
    if max_points < 4:
        return _metric_points_spread(cursor, run_id=run_id, key=key, max_points=max_points)
    cursor.execute(
        _metric_sql(
            f"SELECT (SELECT step FROM {{table}} WHERE {of_key} ORDER BY step LIMIT 1),"
            f" (SELECT step FROM {{table}} WHERE {of_key} ORDER BY step DESC LIMIT 1)"
        ),
        [run_id, key, run_id, key],
    )
    first, last = cursor.fetchone()
    # Every bucket gives at most two points and the first and last may each add one.
    buckets = (max_points - 2) // 2
    span = last - first + 1  # > max_points: steps are unique per key
    in_bucket = f"{of_key} AND step >= bounds.lo AND step < bounds.hi"
    if connection.vendor == "sqlite":
        # SQLite fills a bare column from the row min() or max() chose: one pass per extreme.
        lowest = f"SELECT step FROM (SELECT MIN({{value}}), step FROM {{table}} WHERE {in_bucket}) x"
        highest = f"SELECT step FROM (SELECT MAX({{value}}), step FROM {{table}} WHERE {in_bucket}) x"
    else:
        lowest = f"SELECT step FROM {{table}} WHERE {in_bucket} ORDER BY {{value}}, step LIMIT 1"
        highest = f"SELECT step FROM {{table}} WHERE {in_bucket} ORDER BY {{value}} DESC, step LIMIT 1"
    cursor.execute(
        _metric_sql(
            "WITH RECURSIVE bucket(i) AS ("
            " SELECT 0 UNION ALL SELECT i + 1 FROM bucket WHERE i + 1 < %s"
            "), bounds(lo, hi) AS ("
            " SELECT %s + i * CAST(%s AS BIGINT) / %s, %s + (i + 1) * CAST(%s AS BIGINT) / %s"
            " FROM bucket"
            "), picked(step) AS ("
            f" SELECT ({lowest}) FROM bounds UNION SELECT ({highest}) FROM bounds"
            " UNION SELECT %s UNION SELECT %s"
            ") SELECT m.step, m.{value} FROM picked"
            " JOIN {table} m ON m.run_id = %s AND m.{key} = %s AND m.step = picked.step"
            " ORDER BY m.step"
        ),
        [buckets, first, span, buckets, first, span, buckets,
         run_id, key, run_id, key, first, last, run_id, key],
    )
    return cursor.fetchall()


def _metric_points_spread(
    cursor: Any, *, run_id: int, key: str, max_points: int
) -> list[tuple[int, float]]:
    """Fewer than 4 points leave no room for a bucket's lowest and highest beside the first
    and the last: keep evenly spread points, the last one always."""
    of_key = "run_id = %s AND {key} = %s AND {value} IS NOT NULL"
    cursor.execute(_metric_sql(f"SELECT COUNT(*) FROM {{table}} WHERE {of_key}"), [run_id, key])
    (total,) = cursor.fetchone()
    if max_points == 1:
        offsets = [total - 1]
    else:
        stride = (total - 1) / (max_points - 1)
        offsets = [round(i * stride) for i in range(max_points)]
    points = []
    for offset in offsets:
        cursor.execute(
            _metric_sql(
                f"SELECT step, {{value}} FROM {{table}} WHERE {of_key} ORDER BY step LIMIT 1 OFFSET %s"
            ),
            [run_id, key, offset],
        )
        points.append(cursor.fetchone())
    return points


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


def run_alerts(*, run: Run) -> list[dict[str, Any]]:
    """The run's health alerts (worker/health.py), one per kind and attempt, oldest first:
    `{kind, step, message, active}`. A new attempt ("started") re-checks from scratch, so
    what the previous attempt left active no longer is. Uses `run.health_events` when the
    caller prefetched it (`runs_with_alerts`)."""
    events = getattr(run, "health_events", None)
    if events is None:
        events = RunEvent.objects.filter(run=run, kind__in=HEALTH_EVENT_KINDS).order_by("created_at", "id")
    alerts: list[dict[str, Any]] = []
    open_alerts: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.kind == "started":
            for alert in open_alerts.values():
                alert["active"] = False
            open_alerts.clear()
            continue
        kind = str(event.data.get("alert", ""))
        if event.data.get("active", True):
            alert = {"kind": kind, "step": event.data.get("step"), "message": event.message, "active": True}
            open_alerts[kind] = alert
            alerts.append(alert)
        elif kind in open_alerts:
            open_alerts.pop(kind)["active"] = False
    return alerts


HEALTH_EVENT_KINDS = ("alert", "started")


def runs_with_alerts(runs: QuerySet[Run]) -> QuerySet[Run]:
    """`runs` with the events `run_alerts` reads prefetched: one query for a whole list."""
    return runs.prefetch_related(
        Prefetch(
            "events",
            queryset=RunEvent.objects.filter(kind__in=HEALTH_EVENT_KINDS).order_by("created_at", "id"),
            to_attr="health_events",
        )
    )


def run_status_display(*, run: Run, alerts: list[dict[str, Any]] | None = None) -> str:
    """The status as people read it: a run that succeeded with an alert still active
    "succeeded, with warnings"; `run.status` itself stays one of Run.Status."""
    if run.status == Run.Status.SUCCEEDED:
        if alerts is None:
            alerts = run_alerts(run=run)
        if any(alert["active"] for alert in alerts):
            return "succeeded, with warnings"
    return str(run.status)
