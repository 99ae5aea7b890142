"""One training process of a run with several (worker/training/distributed.py explains the whole):
started by the run's Celery task through the lab's launcher (worker/training/launch.py), it joins
the run's process group, trains its share of every batch, and rank 0 records the run.

    python -m worker.training.rank --run-id ID --lease-owner OWNER --start-step N --resume-from DIR
        --model-source DIR --vllm-url URL --supervisor PID

Exit status: 0 when training ended (rank 0 recorded how), 1 when rank 0 recorded a failure
(its launcher then stops the others, which may be waiting for it in a collective), and the
status of the error or signal otherwise (the task records the run failed).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path


def _stop_on_sigterm(signum: int, frame: object) -> None:
    # SystemExit unwinds through the training code's `finally`s: rank 0's telemetry is flushed.
    # A second SIGTERM (the group's and the launcher's) must not interrupt that unwinding; the
    # launcher's SIGKILL after its grace ends a process that does not unwind.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m worker.training.rank")
    parser.add_argument("--run-id", type=int, required=True)
    parser.add_argument("--lease-owner", required=True)
    parser.add_argument("--start-step", type=int, default=0)
    parser.add_argument("--resume-from", default="")
    parser.add_argument("--model-source", default="")
    parser.add_argument("--vllm-url", default="")
    parser.add_argument("--supervisor", type=int, required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.local")
    import django

    django.setup()
    from worker.training.distributed import RankGroup, join_group, watch_supervisor

    watch_supervisor(args.supervisor)
    import torch

    join_group()
    from webapp.runs.checkpoints import run_dir
    from webapp.runs.config import RunConfig
    from webapp.runs.models import Run
    from webapp.settings.env import env_int
    from worker.training.runner import grpo_phase

    torch.set_num_threads(env_int("ENVLAB_TORCH_THREADS", 1))
    run = Run.objects.get(pk=args.run_id)
    group = RankGroup.from_env()
    status = grpo_phase(
        run=run, config=RunConfig.model_validate(run.config), lease_owner=args.lease_owner,
        output_dir=run_dir(run.pk),
        start_step=args.start_step, resume_from=Path(args.resume_from) if args.resume_from else None,
        model_source=args.model_source or None, group=group, vllm_url=args.vllm_url or None,
    )
    return 1 if group.lead and status == Run.Status.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
