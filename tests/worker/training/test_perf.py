"""perf/* metrics: generated tokens per second of generation, and GPU memory where CUDA runs
(no GPU here: the CUDA branch is exercised on a GPU worker; on CPU it reports nothing)."""

from __future__ import annotations

import torch

from worker.training.perf import PerfMeter, completion_tokens


def test_tokens_per_second_sums_the_steps_generation_batches_then_starts_over():
    meter = PerfMeter()
    meter.generation(seconds=2.0, tokens=300)
    meter.generation(seconds=1.0, tokens=150)
    assert meter.drain() == {"perf/generated_tokens_per_s": 150.0}
    assert meter.drain() == {}


def test_nonsense_timings_are_ignored():
    meter = PerfMeter()
    meter.generation(seconds=-1.0, tokens=10)
    meter.generation(seconds=1.0, tokens=-5)
    meter.generation(seconds=0.0, tokens=0)
    assert meter.drain() == {}


def test_cuda_memory_is_left_out_where_cuda_is_not_available():
    meter = PerfMeter(cuda=True)
    meter.generation(seconds=1.0, tokens=10)
    assert meter.drain() == {"perf/generated_tokens_per_s": 10.0}


def test_completion_tokens_counts_model_tokens_only():
    completion = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    tools = torch.tensor([[1, 0, 1, 0], [1, 1, 0, 0]])
    assert completion_tokens({"completion_mask": completion}) == 5
    assert completion_tokens({"completion_mask": completion, "tool_mask": tools}) == 4
    assert completion_tokens({}) == 0
