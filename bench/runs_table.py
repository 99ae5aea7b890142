"""Runs table: `GET /api/runs/?limit=50` with summaries of 3 metric keys, over 10,000 runs of
one user (each with 3 keys x 30 logged steps: 900k points), over HTTP from a real ASGI server
(uvicorn), on SQLite and on PostgreSQL.

Each database is measured in its own process with its own scratch database (as
bench/metric_series.py does). Baseline in the same run, interleaved request by request: the
same page without `summary=`. Also measured: a filtered, re-sorted page (a tag, a status,
ordering=-step) with the summaries, and a deep page (offset 9,000). Target: p95 <= 150 ms
with summaries, on each database.

`python -m bench runs_table` runs both; `python -m bench.runs_table sqlite` one.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from bench.metric_series import (
    _cpu_ms,
    _pg_admin,
    _serve,
    _setup,
    _write_points,
    measure_each_database,
)

RUNS = 10_000
KEYS = ("train/reward", "train/loss", "train/kl")
STEPS = 30
PAGE = 50
ROUNDS = 40
TARGET_P95_MS = 150
# Its own scratch database: metric_series drops and makes envlab_bench.
PG_NAME = "envlab_bench_runs_table"


def main() -> dict[str, Any]:
    results = measure_each_database("runs_table")
    return {
        "benchmark": "runs_table",
        "runs": RUNS,
        "keys": len(KEYS),
        "steps": STEPS,
        "page": PAGE,
        "rounds": ROUNDS,
        "databases": results,
        "target_p95_ms": TARGET_P95_MS,
        "pass": all(r["pass"] for r in results.values()),
    }


def _fill(user_id: int) -> None:
    """RUNS runs (every 10th failed, every 7th tagged "lr-sweep", groups of 20) and their
    points, written by `_write_points` 500 runs at a time."""
    from django.db import transaction
    from django.utils import timezone

    from webapp.runs.models import Run, RunTag

    now = timezone.now()
    with transaction.atomic():
        Run.objects.bulk_create(
            [
                Run(
                    owner_id=user_id, name=f"run {i}", config={}, model="demo:echo", max_steps=STEPS, step=i % STEPS,
                    status=Run.Status.FAILED if i % 10 == 0 else Run.Status.SUCCEEDED, group=f"g{i // 20}",
                    finished_at=now,
                )
                for i in range(RUNS)
            ],
            batch_size=1000,
        )
        ids = list(Run.objects.filter(owner_id=user_id).order_by("pk").values_list("pk", flat=True))
        RunTag.objects.bulk_create([RunTag(run_id=pk, slug="lr-sweep") for i, pk in enumerate(ids) if i % 7 == 0])

    def rows(pk: int) -> list[tuple[int, int, str, float, int]]:
        return [
            (pk, step, key, ((pk * 31 + step * 7 + index) % 101) / 100, step * len(KEYS) + index)
            for step in range(1, STEPS + 1) for index, key in enumerate(KEYS)
        ]

    _write_points([row for pk in ids[start : start + 500] for row in rows(pk)] for start in range(0, len(ids), 500))


def _stats(samples: list[float]) -> dict[str, float]:
    from bench.common import median, percentile

    return {"p50": round(median(samples), 1), "p95": round(percentile(samples, 95), 1), "max": round(max(samples), 1)}


def measure(vendor: str) -> dict[str, Any]:
    env = _setup(vendor, PG_NAME)
    import httpx
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    user = User.objects.create_user("bench-table", password="bench-table-pw")
    started = time.perf_counter()
    _fill(user.pk)
    fill_seconds = time.perf_counter() - started
    login = Client(HTTP_HOST="127.0.0.1")
    login.force_login(user)
    cookie = login.cookies["sessionid"].value
    connection.close()

    summary = "&".join(f"summary={key}" for key in KEYS)
    urls = {
        "summaries": f"/api/runs/?limit={PAGE}&{summary}",
        "baseline": f"/api/runs/?limit={PAGE}",
        "filtered": f"/api/runs/?limit={PAGE}&{summary}&tag=lr-sweep&status=succeeded&ordering=-step",
        "deep_page": f"/api/runs/?limit={PAGE}&offset=9000&{summary}",
    }
    samples: dict[str, list[float]] = {name: [] for name in urls}
    server, base = _serve(env)
    try:
        http = httpx.Client(base_url=base, cookies={"sessionid": cookie}, timeout=600)
        bodies = {}
        for name, url in urls.items():  # the first of each pays lazy imports and cold caches
            response = http.get(url)
            assert response.status_code == 200, response.text[:300]
            bodies[name] = response.json()
        cpu_before = _cpu_ms(server.pid)
        for _ in range(ROUNDS):
            for name, url in urls.items():
                began = time.perf_counter()
                response = http.get(url)
                samples[name].append((time.perf_counter() - began) * 1000)
                assert response.status_code == 200
        server_cpu_ms = (_cpu_ms(server.pid) - cpu_before) / (ROUNDS * len(urls))
        http.close()
    finally:
        server.terminate()
        server.wait(timeout=30)

    page = bodies["summaries"]
    assert page["count"] == RUNS
    assert len(page["results"]) == PAGE
    assert all(sorted(row["summary"]) == sorted(KEYS) for row in page["results"])
    assert all(row["summary"][KEYS[0]]["step"] == STEPS for row in page["results"])
    assert all(row["summary"] == {} for row in bodies["baseline"]["results"])
    filtered = bodies["filtered"]["results"]
    assert filtered
    assert all("lr-sweep" in row["tags"] and row["status"] == "succeeded" for row in filtered)
    assert len(bodies["deep_page"]["results"]) == PAGE
    connection.close()
    if vendor == "postgresql":
        _pg_admin(f"DROP DATABASE IF EXISTS {PG_NAME}")
    stats = {name: _stats(values) for name, values in samples.items()}
    return {
        "database": vendor,
        "fill_seconds": round(fill_seconds, 1),
        "points": RUNS * len(KEYS) * STEPS,
        "filtered_count": bodies["filtered"]["count"],
        "http_ms": stats,
        "summary_cost_p50_ms": round(stats["summaries"]["p50"] - stats["baseline"]["p50"], 1),
        "server_cpu_ms_per_request": round(server_cpu_ms, 1),
        # The machine is shared: the 1-minute load average when the timed rounds ended.
        "load_average": round(os.getloadavg()[0], 1),
        "pass": stats["summaries"]["p95"] <= TARGET_P95_MS,
    }


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1])))
