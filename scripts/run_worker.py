"""A training worker for the queues this machine can carry, for machines beyond the first (GPU
hosts): `python scripts/run_worker.py` (or `envlab-server worker` where the wheel is installed)
with DATABASE_URL and REDIS_URL pointing at the lab's PostgreSQL and Redis. It advertises its
CUDA devices and vLLM in its heartbeat and consumes `train` plus `train-cuda-<N>` /
`train-vllm-<N>` for what it has (webapp/runs/routing.py), one run at a time. Extra arguments
go to `celery worker` (e.g. `--loglevel DEBUG`)."""

from __future__ import annotations

import sys

from webapp.server import main

if __name__ == "__main__":
    sys.exit(main(["worker", *sys.argv[1:]]))
