"""Throughput and GPU memory per step, merged into the step's metrics (`perf/*`):

  perf/generated_tokens_per_s  completion tokens the model generated in the step's generation
                               batches, over the seconds those batches took (tool calls included),
                               summed over the run's training processes
  perf/gpu_memory_gib          peak CUDA memory allocated during the step, on the fullest GPU
                               of the run's training processes (only where CUDA is in use)

and where the step's time went (the run page's "Where the time goes" chart), in seconds:

  perf/step_s                  the step, from its start to its end (generation, tool calls, the
                               optimizer step), on the slowest process
  perf/generation_s            the step's generation batches, tool calls included, on the
                               slowest process (0 at a step that reused a batch)
  perf/tool_s                  the environment's tool calls, summed over every call of the step on
                               every process (episodes of a batch may call side by side, so this
                               can exceed the generation's own time)

The trainer hands each generation batch to `PerfMeter.generation`; the telemetry callback takes
`drain()` at every log. Never raises into training (the callers guard it too)."""

from __future__ import annotations

import threading
from typing import Any

GIB = float(2**30)


class PerfMeter:
    def __init__(self, *, cuda: bool = False) -> None:
        self.cuda = cuda
        self._lock = threading.Lock()
        self._tokens = 0
        self._seconds = 0.0
        self._step_seconds: float | None = None

    def generation(self, *, seconds: float, tokens: int) -> None:
        if seconds < 0 or tokens < 0:
            return
        with self._lock:
            self._seconds += seconds
            self._tokens += tokens

    def step(self, *, seconds: float) -> None:
        """The step's own duration (the callback's step begin to step end)."""
        if seconds >= 0:
            with self._lock:
                self._step_seconds = seconds

    def drain(self) -> dict[str, float]:
        return perf_metrics([self.take()])

    def take(self) -> dict[str, float | int | None]:
        """This process's tokens, seconds and peak memory since the last take (plain data, for
        the first training process to combine with the others' in `perf_metrics`)."""
        with self._lock:
            tokens, seconds, step = self._tokens, self._seconds, self._step_seconds
            self._tokens, self._seconds, self._step_seconds = 0, 0.0, None
        return {
            "tokens": tokens, "seconds": seconds, "step_seconds": step,
            "gpu_memory_gib": _cuda_peak_gib() if self.cuda else None,
        }


def perf_metrics(parts: list[dict[str, float | int | None]]) -> dict[str, float]:
    """The step's perf metrics from every training process's `take()`: the processes generate
    side by side, so the run's rate is the sum of theirs; the memory is the fullest GPU's."""
    out: dict[str, float] = {}
    rates = [
        float(tokens) / float(seconds)
        for part in parts
        if (seconds := part.get("seconds") or 0) > 0 and (tokens := part.get("tokens") or 0) > 0
    ]
    if rates:
        out["perf/generated_tokens_per_s"] = sum(rates)
    memory = [float(gib) for part in parts if (gib := part.get("gpu_memory_gib")) is not None]
    if memory:
        out["perf/gpu_memory_gib"] = max(memory)
    steps = [float(timed) for part in parts if (timed := part.get("step_seconds")) is not None]
    if steps:  # a step was timed: where its time went, generation 0 when it reused a batch
        out["perf/step_s"] = max(steps)
        out["perf/generation_s"] = max(float(part.get("seconds") or 0.0) for part in parts)
    return out


def tool_seconds(raw: dict[str, Any] | None) -> dict[str, float]:
    """`perf/tool_s` from the step's merged tool counts (envs/adapters/toolstats.py)."""
    if not raw:
        return {}
    return {"perf/tool_s": float(sum(raw.get("seconds", {}).values()))}


def completion_tokens(output: dict[str, Any]) -> int:
    """Tokens the model generated in one scored batch (TRL's `completion_mask`; the tool
    results TRL splices in are masked out by `tool_mask` where present)."""
    completion = output.get("completion_mask")
    if completion is None:
        return 0
    tools = output.get("tool_mask")
    return int((completion * tools).sum().item() if tools is not None else completion.sum().item())


def _cuda_peak_gib() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    peak = torch.cuda.max_memory_allocated() / GIB
    torch.cuda.reset_peak_memory_stats()
    return peak
