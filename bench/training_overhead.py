"""Training overhead: the same 20-step demo run as bare TRL in one process (no telemetry,
no worker) against the same run launched through the API path and trained by a real
Celery worker with telemetry on. Both time `trainer.train()`; the ratio is the cost of
telemetry, the lease heartbeat and rollout capture. Target: <= 1.03, median of 5 rounds;
the spread is each round's worker/bare ratio, lowest and highest."""

from __future__ import annotations

import time
from typing import Any

STEPS = 20


def _config(env_id: int) -> dict[str, Any]:
    return {
        "name": "bench-overhead",
        "model": "demo:echo",
        "environments": [{"environment": env_id, "name": "echo", "prompt": "Echo '{phrase}'.", "rows": 80}],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        "grpo": {"num_generations": 4, "max_steps": STEPS, "per_device_train_batch_size": 4,
                 "max_completion_length": 48, "max_tool_calling_iterations": 2, "learning_rate": 5e-5,
                 "save_steps": 10},
    }


def _bare(run_id: int, out_dir: str) -> float:
    """Plain GRPOTrainer in this process: no sink, no callbacks, no lease."""
    import os

    import torch

    from webapp.runs.config import RunConfig
    from webapp.runs.models import Run
    from worker.runner import build_trainer

    torch.set_num_threads(int(os.environ.get("ENVLAB_TORCH_THREADS", "1")))
    run = Run.objects.get(pk=run_id)
    trainer = build_trainer(run, RunConfig.model_validate(run.config), None, __import__("pathlib").Path(out_dir))
    started = time.perf_counter()
    trainer.train()
    return time.perf_counter() - started


def main(rounds: int = 5) -> dict[str, Any]:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import transaction

    from tests.envs.servers import run_env_server
    from tests.support.processes import start_worker
    from webapp.catalog.services import environment_register
    from webapp.runs.models import Run, RunEvent
    from webapp.runs.services import run_launch
    from worker.demo_model import build_demo_model, demo_model_path, is_built

    if not is_built(demo_model_path("echo", settings.MODELS_DIR)):
        print("  building demo:echo first (about 3 minutes) ...", flush=True)
        build_demo_model(demo_model_path("echo", settings.MODELS_DIR), variant="demo")
    user = User.objects.create_user("bench", password="bench")
    bare_times: list[float] = []
    worker_times: list[float] = []
    with run_env_server("envs.echo.server:app") as url:
        env = environment_register(owner=user, name="echo", base_url=url, capacity=64)
        worker = start_worker("bench-worker", ENVLAB_MODELS_DIR=str(settings.MODELS_DIR),
                              DJANGO_SETTINGS_MODULE="webapp.settings.local")
        try:
            for round_index in range(rounds + 1):
                with transaction.atomic():
                    run = run_launch(owner=user, data=_config(env.pk))
                deadline = time.monotonic() + 900
                while Run.objects.get(pk=run.pk).status in Run.ACTIVE:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"worker run did not finish:\n{worker.log_text()[-3000:]}")
                    time.sleep(0.5)
                run.refresh_from_db()
                if run.status != "succeeded":
                    raise RuntimeError(f"worker run {run.status}: {run.error}\n{worker.log_text()[-3000:]}")
                seconds = RunEvent.objects.get(run=run, kind="succeeded").data["train_seconds"]
                bare_run = Run.objects.create(owner=user, name="bare", config=run.config, model=run.model,
                                              max_steps=run.max_steps, status="succeeded")
                bare = _bare(bare_run.pk, str(settings.RUNS_DIR / f"bare-{bare_run.pk}"))
                if round_index == 0:
                    print(f"  warm-up: worker {seconds:.2f} s, bare {bare:.2f} s", flush=True)
                    continue
                worker_times.append(seconds)
                bare_times.append(bare)
                print(f"  round {round_index}: worker {seconds:.2f} s, bare {bare:.2f} s", flush=True)
        finally:
            worker.stop()
    from bench.common import median

    ratio = median(worker_times) / median(bare_times)
    per_round = [w / b for w, b in zip(worker_times, bare_times, strict=True)]
    return {
        "benchmark": "training_overhead",
        "steps": STEPS,
        "bare_seconds": bare_times,
        "worker_seconds": worker_times,
        "ratio": ratio,
        "round_ratio_min": min(per_round),
        "round_ratio_max": max(per_round),
        "target": 1.03,
        "pass": ratio <= 1.03,
    }
