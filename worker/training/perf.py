"""Throughput and GPU memory per step, merged into the step's metrics (`perf/*`):

  perf/generated_tokens_per_s  completion tokens the model generated in the step's generation
                               batches, over the seconds those batches took (tool calls included),
                               summed over the run's training processes
  perf/gpu_memory_gib          peak CUDA memory allocated during the step, on the fullest GPU
                               of the run's training processes (only where CUDA is in use)

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

    def generation(self, *, seconds: float, tokens: int) -> None:
        if seconds < 0 or tokens < 0:
            return
        with self._lock:
            self._seconds += seconds
            self._tokens += tokens

    def drain(self) -> dict[str, float]:
        return perf_metrics([self.take()])

    def take(self) -> dict[str, float | int | None]:
        """This process's tokens, seconds and peak memory since the last take (plain data, for
        the first training process to combine with the others' in `perf_metrics`)."""
        with self._lock:
            tokens, seconds = self._tokens, self._seconds
            self._tokens, self._seconds = 0, 0.0
        return {"tokens": tokens, "seconds": seconds, "gpu_memory_gib": _cuda_peak_gib() if self.cuda else None}


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
    return out


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
