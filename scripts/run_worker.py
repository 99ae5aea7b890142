"""A training worker for the queues this machine can carry, for machines beyond the first (GPU
hosts): `python scripts/run_worker.py` with DATABASE_URL and REDIS_URL pointing at the lab's
PostgreSQL and Redis. It advertises its CUDA devices and vLLM in its heartbeat and consumes
`train` plus `train-cuda-<N>` / `train-vllm-<N>` for what it has (webapp/runs/routing.py), one
run at a time. Extra arguments go to `celery worker` (e.g. `--loglevel DEBUG`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def training_queues(env: dict[str, str]) -> list[str]:
    """Asked in a child with Django set up: the same code the worker's heartbeat runs."""
    code = "import django; django.setup(); from worker.celery_app import training_queues; print(','.join(training_queues()))"
    out = subprocess.run([PY, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1].split(",")


def worker_command(queues: list[str], *, name: str = "train", extra: tuple[str, ...] = ()) -> list[str]:
    return [PY, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", ",".join(queues),
            "-n", f"{name}@%h", "--concurrency", "1", "--prefetch-multiplier", "1",
            "--loglevel", "INFO", *extra]


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.local")
    queues = training_queues(env)
    print(f"training worker for queues: {', '.join(queues)}", flush=True)
    return subprocess.call(worker_command(queues, extra=tuple(sys.argv[1:])), cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
