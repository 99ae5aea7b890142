"""Reading a run's metric series: which keys it logged, and each key's points, long series
cut into step buckets from the pre-aggregated tiers (metric_tiers.py)."""

from __future__ import annotations

from typing import Any

from django.db import connection

from webapp.runs.models import MetricPoint, Run
from webapp.runs.telemetry import metric_tiers


def run_metric_keys(*, run: Run) -> list[str]:
    """The keys a run logged that can be charted, sorted; keys starting with "_" (such as
    the step's wall time) are the lab's bookkeeping and left out."""
    return sorted(key for key in _metric_keys_logged(run_id=run.pk) if not key.startswith("_"))


def run_metric_series(
    *, run: Run, keys: list[str] | None, max_points: int = 500
) -> dict[str, list[list[float]]]:
    """Each key's non-null points as `[step, value]`, by step, at most max_points of them.

    A longer series is cut into aligned step buckets (`metric_tiers.bucket_width`: as many
    as (max_points - 2) // 2 allow, of width 2**j or 3 * 2**j), each keeping its lowest and
    its highest point where they occur, plus the series' first and last point: a one-step
    spike on a 100k-step run still shows. Buckets of 16 steps or more are read from
    pre-aggregated tiers (metric_tiers.py), kept up by the worker's telemetry flusher as
    steps are written (never the training thread) and made on read where missing, so a read
    touches about max_points rows per key whatever the run's length (security review L2),
    the first one included. Keys are listed
    by the database's order; unknown keys are left out.
    """
    wanted = sorted(set(keys)) if keys else _metric_keys_logged(run_id=run.pk)
    found: dict[str, list[tuple[int, float]]] = {}
    with connection.cursor() as cursor:
        if max_points < 4:
            for key in wanted:
                found[key] = _metric_points(cursor, run_id=run.pk, key=key, max_points=max_points)
        else:
            ends = _metric_ends(cursor, run_id=run.pk, keys=wanted, max_points=max_points)
            longer = {key: (first, last) for key, (counted, first, last) in ends.items() if counted > max_points}
            found.update(_metric_points_of(cursor, run_id=run.pk, keys=[k for k in ends if k not in longer]))
            if longer:
                state = metric_tiers.TierState(run_id=run.pk, keys=list(longer))
                found.update(
                    metric_tiers.series_many(cursor, state=state, ends=longer, buckets=(max_points - 2) // 2)
                )
    return {key: [[step, value] for step, value in found[key]] for key in wanted if found.get(key)}


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


_OF_KEY = "run_id = %s AND {key} = %s AND {value} IS NOT NULL"


def _metric_longer_than(cursor: Any, *, run_id: int, key: str, max_points: int) -> bool:
    """Whether the key has more than max_points points, counting no further than that."""
    cursor.execute(
        _metric_sql(f"SELECT COUNT(*) FROM (SELECT 1 FROM {{table}} WHERE {_OF_KEY} LIMIT %s) head"),
        [run_id, key, max_points + 1],
    )
    (counted,) = cursor.fetchone()
    return counted > max_points


_KEYS_A_STATEMENT = 100  # one SELECT a key: under SQLite's 500 in one compound statement


def _metric_ends(
    cursor: Any, *, run_id: int, keys: list[str], max_points: int
) -> dict[str, tuple[int, tuple[int, float], tuple[int, float]]]:
    """(points counted up to max_points + 1, first point, last point) of each key that has
    points, in one round trip a hundred keys."""
    one = (
        f"SELECT {{index}}, (SELECT COUNT(*) FROM (SELECT 1 FROM {{table}} WHERE {_OF_KEY} LIMIT %s) head),"
        " f.step, f.{value}, l.step, l.{value} FROM"
        f" (SELECT step, {{value}} FROM {{table}} WHERE {_OF_KEY} ORDER BY step LIMIT 1) f,"
        f" (SELECT step, {{value}} FROM {{table}} WHERE {_OF_KEY} ORDER BY step DESC LIMIT 1) l"
    )
    ends = {}
    for offset in range(0, len(keys), _KEYS_A_STATEMENT):
        chunk = keys[offset:offset + _KEYS_A_STATEMENT]
        cursor.execute(
            _metric_sql(" UNION ALL ".join(one.replace("{index}", str(i)) for i in range(len(chunk)))),
            [v for key in chunk for v in (run_id, key, max_points + 1, run_id, key, run_id, key)],
        )
        for index, counted, first_step, first_value, last_step, last_value in cursor.fetchall():
            ends[chunk[index]] = (counted, (first_step, first_value), (last_step, last_value))
    return ends


def _metric_points_of(cursor: Any, *, run_id: int, keys: list[str]) -> dict[str, list[tuple[int, float]]]:
    """Every point of these keys (each fits in max_points), in one round trip."""
    found: dict[str, list[tuple[int, float]]] = {}
    if not keys:
        return found
    cursor.execute(
        _metric_sql(
            "SELECT {key}, step, {value} FROM {table} WHERE run_id = %s AND {value} IS NOT NULL"
            f" AND {{key}} IN ({', '.join(['%s'] * len(keys))}) ORDER BY {{key}}, step"
        ),
        [run_id, *keys],
    )
    for key, step, value in cursor.fetchall():
        found.setdefault(key, []).append((step, value))
    return found


def _metric_points(
    cursor: Any, *, run_id: int, key: str, max_points: int
) -> list[tuple[int, float]]:
    """A series that fits in max_points as it is, or fewer than 4 points of a longer one."""
    if max_points < 4 and _metric_longer_than(cursor, run_id=run_id, key=key, max_points=max_points):
        return _metric_points_spread(cursor, run_id=run_id, key=key, max_points=max_points)
    cursor.execute(
        _metric_sql(f"SELECT step, {{value}} FROM {{table}} WHERE {_OF_KEY} ORDER BY step"),
        [run_id, key],
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
