"""Which workers can carry a run: Celery queues by capability (no home-made scheduler).

A run needs a CPU, or N CUDA devices, or N CUDA devices and vLLM (`run_needs`). Each need has
its own queue (`queue_for`): `train`, `train-cuda-<N>`, `train-vllm-<N>`. A worker consumes
every queue it can carry (`queues_for`, from the capabilities it advertises in its heartbeat),
so a GPU run never reaches a CPU-only worker, and any worker may take a CPU run.

Pure functions over the config and plain dicts: the web app routes and checks launches with
them, the worker's start-up picks its queues with them (worker/celery_app.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webapp.runs.config import RunConfig

TRAIN_QUEUE = "train"
MAX_GPUS = 8


@dataclass(frozen=True)
class Needs:
    gpus: int = 0
    vllm: bool = False

    def describe(self) -> str:
        if not self.gpus:
            return "a CPU"
        devices = f"{self.gpus} CUDA device{'s' if self.gpus > 1 else ''}"
        return f"{devices} and vLLM" if self.vllm else devices


def run_needs(config: RunConfig) -> Needs:
    if config.device != "cuda":
        return Needs()
    # A server the worker starts itself runs on a GPU of its own, beside the training ones.
    extra = 1 if config.generation.managed_server else 0
    return Needs(gpus=config.gpus + extra, vllm=config.generation.backend == "vllm")


def stored_needs(run: Any) -> Needs:
    """The needs a run's row recorded at launch (Run.needs_gpus, Run.needs_vllm)."""
    return Needs(gpus=run.needs_gpus, vllm=run.needs_vllm)


def queue_for(needs: Needs) -> str:
    if not needs.gpus:
        return TRAIN_QUEUE
    return f"train-{'vllm' if needs.vllm else 'cuda'}-{needs.gpus}"


def _count(capabilities: dict[str, Any], key: str) -> int:
    value = capabilities.get(key) if isinstance(capabilities, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def can_carry(capabilities: dict[str, Any], needs: Needs) -> bool:
    if not needs.gpus:
        return True
    if _count(capabilities, "cuda_devices") < needs.gpus:
        return False
    return not needs.vllm or capabilities.get("vllm") is True


def queues_for(capabilities: dict[str, Any]) -> list[str]:
    """Every training queue a worker with these capabilities can carry, CPU first."""
    gpus = min(_count(capabilities, "cuda_devices"), MAX_GPUS)
    queues = [TRAIN_QUEUE]
    queues += [queue_for(Needs(gpus=n)) for n in range(1, gpus + 1)]
    if capabilities.get("vllm") is True:
        queues += [queue_for(Needs(gpus=n, vllm=True)) for n in range(1, gpus + 1)]
    return queues


def start_hint(needs: Needs) -> str:
    """How to start a worker that can carry `needs` (shown with a refusal)."""
    if not needs.gpus:
        return "start one with `make run`"
    extra = ' with the gpu extra (`pip install -c constraints-gpu.txt -e ".[gpu]"`)' if needs.vllm else ""
    return f"start `scripts/run_worker.py` on a machine with {needs.describe()}{extra}"
