"""Metric series: `GET /api/runs/<id>/metrics/` for 20 keys of a 100k-step run at
max_points=1000 (the API view through Django's in-process test client: routing, session
auth, throttling, selector, JSON). Baseline in the same run: the raw series, every point of
those keys read through the ORM, which is what the selector did before bucketing in SQL.
Targets: p95 <= 200 ms and >= 10x faster than the raw read."""

from __future__ import annotations

import math
import time
from typing import Any

STEPS = 100_000
KEYS = 20
MAX_POINTS = 1000
ROUNDS = 20
RAW_ROUNDS = 3
SPIKE_STEP = 73_421


def _fill(run_id: int, keys: list[str]) -> None:
    """2M rows by executemany: the ORM's bulk_create would take minutes here."""
    from django.db import connection, transaction

    from webapp.runs.models import MetricPoint

    table = connection.ops.quote_name(MetricPoint._meta.db_table)
    sql = f'INSERT INTO {table} (run_id, step, "key", "value", seq) VALUES (%s, %s, %s, %s, %s)'
    with transaction.atomic(), connection.cursor() as cursor:
        for chunk in range(0, STEPS, 5_000):
            rows = []
            for step in range(chunk + 1, chunk + 5_001):
                for index, key in enumerate(keys):
                    value = math.sin(step / 500 + index) + (step * 7919 % 1009) / 10_090
                    if step == SPIKE_STEP and index == 0:
                        value = 1_000.0
                    rows.append((run_id, step, key, value, step * KEYS + index))
            cursor.executemany(sql, rows)


def _timed(fn: Any, rounds: int) -> tuple[list[float], Any]:
    samples, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples, result


def main() -> dict[str, Any]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from bench.common import median, percentile
    from webapp.runs.models import MetricPoint, Run
    from webapp.runs.selectors import run_metric_series

    user = User.objects.create_user("bench-series", password="bench")
    run = Run.objects.create(owner=user, name="bench-series", config={}, model="demo:echo",
                             max_steps=STEPS)
    keys = [f"train/metric_{i:02d}" for i in range(KEYS)]
    started = time.perf_counter()
    _fill(run.pk, keys)
    fill_seconds = time.perf_counter() - started
    if connection.vendor == "sqlite":
        # A served database has been checkpointed long since: reads through a 280 MB
        # write-ahead log of the fill would measure the fill, not the read.
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.execute("ANALYZE")

    def raw(wanted: list[str]) -> dict[str, list[tuple[int, float]]]:
        series: dict[str, list[tuple[int, float]]] = {}
        rows = MetricPoint.objects.filter(run=run, key__in=wanted).order_by("key", "step")
        for key, step, value in rows.values_list("key", "step", "value"):
            if value is not None:
                series.setdefault(key, []).append((step, value))
        return series

    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    query = "&".join(f"key={k}" for k in keys)
    url = f"/api/runs/{run.pk}/metrics/?{query}&max_points={MAX_POINTS}"

    def over_http() -> dict[str, Any]:
        response = client.get(url)
        assert response.status_code == 200, response.content[:300]
        return response.json()["series"]

    over_http()  # warm the page cache and the session once
    http_ms, served = _timed(over_http, ROUNDS)
    selector_ms, _ = _timed(lambda: run_metric_series(run=run, keys=keys, max_points=MAX_POINTS),
                            ROUNDS)
    one_key_ms, _ = _timed(
        lambda: run_metric_series(run=run, keys=keys[:1], max_points=MAX_POINTS), ROUNDS
    )
    raw_ms, raw_series = _timed(lambda: raw(keys), RAW_ROUNDS)
    raw_one_key_ms, _ = _timed(lambda: raw(keys[:1]), RAW_ROUNDS)

    assert sorted(served) == keys
    assert all(len(points) <= MAX_POINTS for points in served.values())
    assert [SPIKE_STEP, 1_000.0] in served[keys[0]]
    assert sum(len(points) for points in raw_series.values()) == STEPS * KEYS
    p95 = percentile(http_ms, 95)
    ratio = median(raw_ms) / median(http_ms)
    return {
        "benchmark": "metric_series",
        "database": connection.vendor,
        "steps": STEPS,
        "keys": KEYS,
        "max_points": MAX_POINTS,
        "rounds": ROUNDS,
        "fill_seconds": round(fill_seconds, 1),
        "points_returned": sum(len(points) for points in served.values()),
        "http_p50_ms": round(median(http_ms), 1),
        "http_p95_ms": round(p95, 1),
        "selector_p50_ms": round(median(selector_ms), 1),
        "selector_one_key_p50_ms": round(median(one_key_ms), 1),
        "baseline_raw_p50_ms": round(median(raw_ms), 1),
        "baseline_raw_ms": [round(ms, 1) for ms in raw_ms],
        "baseline_raw_one_key_p50_ms": round(median(raw_one_key_ms), 1),
        "ratio_raw_vs_http": round(ratio, 1),
        "target_p95_ms": 200,
        "target_ratio": 10,
        "pass": p95 <= 200 and ratio >= 10,
    }
