"""Metric series: `GET /api/runs/<id>/metrics/` for 20 keys of a 100k-step run at
max_points=1000, over HTTP from a real ASGI server (uvicorn), on SQLite and on PostgreSQL.

Each database is measured in its own process with its own scratch database (a SQLite file
under var/bench/, or a PostgreSQL database `envlab_bench` created and dropped here), seeded
directly with 2M points, and its tiers (metric_tiers.py) kept up as the worker's telemetry
flusher keeps them (`tiers_keep_up`, here once per 5 000 steps: the rows come out the same
at any granularity). Baseline in the same run: the raw series, the same keys with every
point (max_points=100000: each series fits, so it is served unchanged, as every series was
before downsampling). Also measured: the first read (cold_ms), the first read of a run whose
tiers were never made (cold_unkept_ms: how every first read went before the flusher kept
them), and what keeping them costs the flusher each time a step passes a block of 16
(keep_up_ms, 20 keys). Targets: p95 <= 150 ms, first read <= 500 ms, >= 10x faster than raw.

`python -m bench metric_series` runs both; `python -m bench.metric_series sqlite` one.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from typing import Any

STEPS = 100_000
KEYS = 20
MAX_POINTS = 1000
ROUNDS = 20
RAW_ROUNDS = 3
SPIKE_STEP = 73_421
DATABASES = ("sqlite", "postgresql")
PG_SERVER = os.environ.get("ENVLAB_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
PG_NAME = "envlab_bench"
TARGET_P95_MS = 150
TARGET_COLD_MS = 500
KEEP_UP_ROUNDS = 20


def measure_each_database(name: str) -> dict[str, Any]:
    """Run `python -m bench.<name> <vendor>` for each of DATABASES, each in its own process;
    the last line it prints is its result."""
    from bench.common import ROOT

    results: dict[str, Any] = {}
    for vendor in DATABASES:
        done = subprocess.run(
            [sys.executable, "-m", f"bench.{name}", vendor],
            cwd=ROOT, capture_output=True, text=True, timeout=1800,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{name} on {vendor} failed:\n{done.stderr[-3000:]}")
        results[vendor] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def main() -> dict[str, Any]:
    results = measure_each_database("metric_series")
    return {
        "benchmark": "metric_series",
        "steps": STEPS,
        "keys": KEYS,
        "max_points": MAX_POINTS,
        "rounds": ROUNDS,
        "databases": results,
        "target_p95_ms": TARGET_P95_MS,
        "target_cold_ms": TARGET_COLD_MS,
        "target_ratio": 10,
        "pass": all(r["pass"] for r in results.values()),
    }


def _fill(run_id: int, keys: list[str]) -> None:
    """2M rows, written by `_write_points`."""

    def rows(chunk: int) -> list[tuple[int, int, str, float, int]]:
        out = []
        for step in range(chunk + 1, chunk + 5_001):
            for index, key in enumerate(keys):
                value = math.sin(step / 500 + index) + (step * 7919 % 1009) / 10_090
                if step == SPIKE_STEP and index == 0:
                    value = 1_000.0
                out.append((run_id, step, key, value, step * KEYS + index))
        return out

    _write_points(rows(chunk) for chunk in range(0, STEPS, 5_000))


def _write_points(batches: Iterable[list[tuple[int, int, str, float, int]]]) -> None:
    """Metric points (run_id, step, key, value, seq), a batch at a time, in one transaction:
    COPY on PostgreSQL, executemany on SQLite (the ORM would take minutes). Then the table
    statistics a served database has."""
    from django.db import connection, transaction

    from webapp.runs.models import MetricPoint

    table = connection.ops.quote_name(MetricPoint._meta.db_table)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f'COPY {table} (run_id, step, "key", "value", seq) FROM STDIN') as copy:
                for batch in batches:
                    for row in batch:
                        copy.write_row(row)
        else:
            sql = f'INSERT INTO {table} (run_id, step, "key", "value", seq) VALUES (%s, %s, %s, %s, %s)'
            for batch in batches:
                cursor.executemany(sql, batch)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # A served database has been checkpointed long since: reads through a 280 MB
            # write-ahead log of the fill would measure the fill, not the read.
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.execute("ANALYZE")
        else:
            # What autovacuum does to a served database: without the visibility map every
            # index-only scan would visit the table too.
            cursor.execute("VACUUM ANALYZE")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    from bench.common import ROOT

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "webapp.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--no-access-log"],
        cwd=ROOT, env=env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return server, f"http://127.0.0.1:{port}"
        except OSError:
            if server.poll() is not None:
                raise RuntimeError("uvicorn exited") from None
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("uvicorn did not listen within 60 s")


def _cpu_ms(pid: int) -> float:
    """CPU time the process has used (user + system): what a request costs the server
    whatever else the machine runs, where wall time on a shared machine also counts waiting."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _timed(fn: Any, rounds: int) -> tuple[list[float], Any]:
    samples, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples, result


def _setup(vendor: str, name: str = PG_NAME) -> dict[str, str]:
    """Point Django at this vendor's scratch database `name`, made empty; returns the server's env."""
    from bench.common import BENCH_DIR

    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    if vendor == "sqlite":
        db = BENCH_DIR / ("series.sqlite3" if name == PG_NAME else f"{name}.sqlite3")
        for suffix in ("", "-wal", "-shm"):
            (BENCH_DIR / f"{db.name}{suffix}").unlink(missing_ok=True)
        url = f"sqlite:///{db}"
    else:
        _pg_admin(f"DROP DATABASE IF EXISTS {name}")
        _pg_admin(f"CREATE DATABASE {name}")
        url = f"{PG_SERVER}/{name}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.local",
        "DATABASE_URL": url,
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/8"),
        "ENVLAB_RUNS_DIR": str(BENCH_DIR / "runs"),
        "HF_HUB_OFFLINE": "1",
        "DEBUG": "0",
        # The bench's own traffic, one user, must not be throttled.
        "ENVLAB_THROTTLE_USER": "100000/min",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import redis

    redis.Redis.from_url(env["REDIS_URL"]).flushdb()
    return env


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def measure(vendor: str) -> dict[str, Any]:
    env = _setup(vendor)
    import httpx
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from bench.common import median, percentile
    from webapp.runs.models import MetricPoint, MetricTier, MetricTierMark, Run
    from webapp.runs.telemetry.metric_tiers import tiers_keep_up

    user = User.objects.create_user("bench-series", password="bench-series-pw")
    run = Run.objects.create(owner=user, name="bench-series", config={}, model="demo:echo", max_steps=STEPS)
    keys = [f"train/metric_{i:02d}" for i in range(KEYS)]
    started = time.perf_counter()
    _fill(run.pk, keys)
    fill_seconds = time.perf_counter() - started
    started = time.perf_counter()
    for through in range(5_000, STEPS + 1, 5_000):
        tiers_keep_up(run_id=run.pk, last_steps=dict.fromkeys(keys, through))
    kept_seconds = time.perf_counter() - started
    login = Client(HTTP_HOST="127.0.0.1")
    login.force_login(user)
    cookie = login.cookies["sessionid"].value
    connection.close()

    server, base = _serve(env)
    try:
        http = httpx.Client(base_url=base, cookies={"sessionid": cookie}, timeout=600)
        query = "&".join(f"key={k}" for k in keys)

        def get(max_points: int) -> dict[str, Any]:
            response = http.get(f"/api/runs/{run.pk}/metrics/?{query}&max_points={max_points}")
            assert response.status_code == 200, response.text[:300]
            return response.json()["series"]

        # The process's own first request pays Django's and DRF's lazy imports: not the series'.
        assert http.get(f"/api/runs/{run.pk}/").status_code == 200
        cold_ms, _ = _timed(lambda: get(MAX_POINTS), 1)  # the series' first read: tiers already kept
        cpu_before = _cpu_ms(server.pid)
        http_ms, served = _timed(lambda: get(MAX_POINTS), ROUNDS)
        server_cpu_ms = (_cpu_ms(server.pid) - cpu_before) / ROUNDS
        one_key_ms, _ = _timed(
            lambda: http.get(f"/api/runs/{run.pk}/metrics/?key={keys[0]}&max_points={MAX_POINTS}"), ROUNDS
        )
        raw_ms, raw_series = _timed(lambda: get(100_000), RAW_ROUNDS)
        tier_rows = MetricTier.objects.filter(run=run).count()
        MetricTier.objects.filter(run=run).delete()
        MetricTierMark.objects.filter(run=run).delete()
        connection.close()
        cold_unkept_ms, _ = _timed(lambda: get(MAX_POINTS), 1)  # makes every row itself
        http.close()
    finally:
        server.terminate()
        server.wait(timeout=30)

    # The flusher's share: 16 more steps of every key, then the keep-up a flush then does.
    keep_up_ms = []
    for round_ in range(KEEP_UP_ROUNDS):
        first = STEPS + 1 + 16 * round_
        MetricPoint.objects.bulk_create([
            MetricPoint(run=run, step=step, key=key, value=0.5, seq=step * KEYS + index)
            for step in range(first, first + 16) for index, key in enumerate(keys)
        ])
        started = time.perf_counter()
        tiers_keep_up(run_id=run.pk, last_steps=dict.fromkeys(keys, first + 15))
        keep_up_ms.append((time.perf_counter() - started) * 1000)
    kept_through = set(MetricTierMark.objects.filter(run=run).values_list("through_step", flat=True))
    assert kept_through == {STEPS + 16 * KEEP_UP_ROUNDS}, kept_through

    assert sorted(served) == keys
    assert all(len(points) <= MAX_POINTS for points in served.values())
    assert [SPIKE_STEP, 1_000.0] in served[keys[0]]
    assert sum(len(points) for points in raw_series.values()) == STEPS * KEYS
    connection.close()
    if vendor == "postgresql":
        _pg_admin(f"DROP DATABASE IF EXISTS {PG_NAME}")
    p95 = percentile(http_ms, 95)
    ratio = median(raw_ms) / median(http_ms)
    return {
        "database": vendor,
        "fill_seconds": round(fill_seconds, 1),
        "tier_rows": tier_rows,
        "points_returned": sum(len(points) for points in served.values()),
        "keep_up_seconds_whole_run": round(kept_seconds, 1),
        "keep_up_p50_ms": round(median(keep_up_ms), 1),
        "keep_up_p95_ms": round(percentile(keep_up_ms, 95), 1),
        "cold_ms": round(cold_ms[0], 1),
        "cold_unkept_ms": round(cold_unkept_ms[0], 1),
        "http_p50_ms": round(median(http_ms), 1),
        "http_p95_ms": round(p95, 1),
        "http_one_key_p50_ms": round(median(one_key_ms), 1),
        "server_cpu_ms_per_request": round(server_cpu_ms, 1),
        "baseline_raw_p50_ms": round(median(raw_ms), 1),
        "baseline_raw_p95_ms": round(percentile(raw_ms, 95), 1),
        "baseline_raw_ms": [round(ms, 1) for ms in raw_ms],
        "ratio_raw_vs_http": round(ratio, 1),
        "pass": p95 <= TARGET_P95_MS and cold_ms[0] <= TARGET_COLD_MS and ratio >= 10,
    }


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1])))
