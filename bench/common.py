"""A scratch installation for benchmarks: its own SQLite database, Redis database and
run folder under var/bench/, so `make bench` never touches the app's or the tests' data."""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
RESULTS_DIR = ROOT / "bench" / "results"


def setup_django() -> None:
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    db = BENCH_DIR / "db.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.environ["DJANGO_SETTINGS_MODULE"] = "webapp.settings.local"
    os.environ["DATABASE_URL"] = f"sqlite:///{db}"
    # Always the bench's own Redis database (the broker and channel layer): with the app's,
    # a running lab's worker could take the benchmark's runs. The host may be given.
    os.environ["REDIS_URL"] = _bench_redis(os.environ.get("ENVLAB_BENCH_REDIS_URL") or os.environ.get("REDIS_URL"))
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ["ENVLAB_RUNS_DIR"] = str(BENCH_DIR / "runs")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["DEBUG"] = "0"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import redis

    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()


def _bench_redis(url: str | None, db: int = 8) -> str:
    """`url`'s server (default 127.0.0.1:6379), database `db`."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url or "redis://127.0.0.1:6379/0")
    return urlunsplit((parts.scheme or "redis", parts.netloc or "127.0.0.1:6379", f"/{db}", "", ""))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine()}


def write_result(name: str, result: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    note = os.environ.get("ENVLAB_BENCH_NOTE", "")
    payload = {**result, "machine": machine(), **({"conditions": note} if note else {})}
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


def median(values: list[float]) -> float:
    return statistics.median(values)


def train_through_worker(user: Any, config: dict[str, Any], worker: Any, *, timeout: float = 900.0) -> tuple[Any, float]:
    """Launch `config` as `user` (the API's path) and wait for the real `worker` to train it;
    returns the succeeded run and the seconds its `trainer.train()` took. Raises with the
    worker's log when the run does not succeed in time."""
    import time

    from django.db import transaction

    from webapp.runs.models import Run, RunEvent
    from webapp.runs.services import run_launch

    with transaction.atomic():
        run = run_launch(owner=user, data=config)
    deadline = time.monotonic() + timeout
    while Run.objects.get(pk=run.pk).status in Run.ACTIVE:
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run.pk} did not finish:\n{worker.log_text()[-3000:]}")
        time.sleep(0.5)
    run.refresh_from_db()
    if run.status != "succeeded":
        raise RuntimeError(f"run {run.pk} {run.status}: {run.error}\n{worker.log_text()[-3000:]}")
    return run, float(RunEvent.objects.get(run=run, kind="succeeded").data["train_seconds"])
