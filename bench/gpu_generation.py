"""GPU generation: the same short demo run trained twice on one GPU by a real Celery worker
with telemetry on, generating with vLLM colocated in the training process and with plain
transformers. Reports steps/s and generated tokens/s for both and their ratio (vLLM over
transformers). Needs a CUDA device and the gpu extra (`pip install -c constraints-gpu.txt
-e ".[gpu]"`); `make bench` does not run it: `python -m bench gpu_generation`.

`python -m bench.gpu_generation --plumbing` runs the transformers half for 2 steps on the CPU
instead, to check the harness on a machine without a GPU (its figures mean nothing).

steps/s: GRPO steps over the seconds `trainer.train()` took (the run's `train_seconds`).
tokens/s: the run's `perf/generated_tokens_per_s` (worker/training/perf.py), median over its steps.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

STEPS = 10


def _config(env_id: int, *, backend: str, device: str, steps: int) -> dict[str, Any]:
    generation: dict[str, Any] = {"backend": backend}
    if backend == "vllm":
        # A tiny model: a small share of the GPU is plenty, and leaves the rest to training.
        generation.update(vllm_mode="colocate", vllm_gpu_memory_utilization=0.3)
    return {
        "name": f"bench-gpu-{backend}",
        "model": "demo:echo",
        "device": device,
        "wait_for_worker": True,
        "environments": [{"environment": env_id, "name": "echo", "prompt": "Echo '{phrase}'.", "rows": 200}],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        "generation": generation,
        "grpo": {"num_generations": 8, "max_steps": steps, "per_device_train_batch_size": 16,
                 "max_completion_length": 64, "max_tool_calling_iterations": 2, "learning_rate": 5e-5,
                 "save_steps": steps},
    }


def _gpu_name() -> str | None:
    from worker.celery_app import _gpus

    gpus = _gpus()
    return str(gpus[0]["name"]) if gpus else None


def _train(user: Any, env_id: int, worker: Any, *, backend: str, device: str, steps: int) -> dict[str, Any]:
    from bench.common import median, train_through_worker
    from webapp.runs.models import MetricPoint

    run, seconds = train_through_worker(
        user, _config(env_id, backend=backend, device=device, steps=steps), worker, timeout=1200
    )
    rates = list(MetricPoint.objects.filter(run=run, key="perf/generated_tokens_per_s").values_list("value", flat=True))
    memory = list(MetricPoint.objects.filter(run=run, key="perf/gpu_memory_gib").values_list("value", flat=True))
    return {
        "run": run.pk,
        "train_seconds": seconds,
        "steps_per_s": steps / seconds,
        "tokens_per_s": median(rates) if rates else None,
        "gpu_memory_gib_max": max(memory) if memory else None,
    }


def main(steps: int = STEPS, plumbing: bool = False) -> dict[str, Any]:
    from django.conf import settings
    from django.contrib.auth.models import User

    from tests.envs.servers import run_env_server
    from tests.support.processes import start_worker
    from webapp.catalog.services import environment_register
    from worker.celery_app import capabilities
    from worker.demo_model import build_demo_model, demo_model_path, is_built

    caps = capabilities()
    if not plumbing and (not caps.get("cuda_devices") or not caps.get("vllm")):
        raise SystemExit(
            "gpu_generation needs a CUDA device and vLLM (the gpu extra); this machine has "
            f"{caps.get('cuda_devices') or 0} CUDA devices and vLLM {caps.get('vllm_version') or 'not installed'}"
        )
    if not is_built(demo_model_path("echo", settings.MODELS_DIR)):
        print("  building demo:echo first ...", flush=True)
        build_demo_model(demo_model_path("echo", settings.MODELS_DIR), variant="demo")
    user = User.objects.create_user("bench-gpu", password="bench")
    device = "cpu" if plumbing else "cuda"
    backends = ["transformers"] if plumbing else ["transformers", "vllm"]
    steps = 2 if plumbing else steps
    results: dict[str, dict[str, Any]] = {}
    with run_env_server("envs.echo.server:app") as url:
        env = environment_register(owner=user, name="echo-bench", base_url=url, capacity=256)
        worker = start_worker(
            "bench-gpu-worker", queues="train,train-cuda-1,train-vllm-1,default",
            ENVLAB_MODELS_DIR=str(settings.MODELS_DIR), DJANGO_SETTINGS_MODULE="webapp.settings.local",
        )
        try:
            for backend in backends:
                results[backend] = _train(user, env.pk, worker, backend=backend, device=device, steps=steps)
                print(f"  {backend}: {json.dumps(results[backend])}", flush=True)
        finally:
            worker.stop()
    out: dict[str, Any] = {
        "benchmark": "gpu_generation",
        "date": time.strftime("%Y-%m-%d"),
        "gpu": _gpu_name(),
        "steps": steps,
        "plumbing_only": plumbing,
        **results,
    }
    if "vllm" in results:
        t, v = results["transformers"], results["vllm"]
        out["steps_ratio"] = v["steps_per_s"] / t["steps_per_s"]
        out["tokens_ratio"] = (v["tokens_per_s"] / t["tokens_per_s"]) if v["tokens_per_s"] and t["tokens_per_s"] else None
    return out


if __name__ == "__main__":
    from bench.common import ROOT, setup_django

    setup_django()
    result = main(plumbing="--plumbing" in sys.argv[1:])
    print(json.dumps(result, indent=2))
    if not result["plumbing_only"]:
        from bench.common import write_result

        print(f"written to {write_result('gpu_generation', result).relative_to(ROOT)}")
