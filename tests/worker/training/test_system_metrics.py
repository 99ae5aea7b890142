"""The system metrics sampler (worker/training/system_metrics.py): this process's real psutil
readings; the GPU readings from a stand-in for nvidia-ml-py's `pynvml` (the test machines have
no GPU and no NVML; a lent GPU machine runs the real one); errors never reach training."""

from __future__ import annotations

import logging
import sys
import threading
import time
import types

import pytest

from worker.training.system_metrics import GIB, SystemSampler


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_the_sampler_records_this_processs_cpu_memory_and_threads():
    samples: list[dict[str, float]] = []
    sampler = SystemSampler(samples.append, interval=0.05, gpus=False)

    sampler.start()
    wait_for(lambda: len(samples) >= 3)
    sampler.stop()

    assert len(samples) >= 3
    assert set(samples[-1]) == {"system/cpu_percent", "system/rss_gib", "system/process_threads"}
    assert all(s["system/cpu_percent"] >= 0 for s in samples)
    assert 0.01 < samples[-1]["system/rss_gib"] < 64
    assert samples[-1]["system/process_threads"] >= threading.active_count()
    assert not sampler._thread.is_alive()
    assert sampler.errors == 0


def test_a_run_shorter_than_the_first_wait_still_gets_one_sample_at_its_end():
    samples: list[dict[str, float]] = []
    sampler = SystemSampler(samples.append, interval=30.0, gpus=False)  # first wait: 1 s

    sampler.start()
    time.sleep(0.2)
    sampler.stop()

    assert len(samples) == 1 and not sampler._thread.is_alive()
    assert set(samples[0]) == {"system/cpu_percent", "system/rss_gib", "system/process_threads"}


def test_an_interval_of_zero_turns_it_off():
    sampler = SystemSampler(lambda values: None, interval=0, gpus=False)
    sampler.start()
    sampler.stop()
    assert sampler._thread is None


class _StandInNVML(types.ModuleType):
    """Stands in for nvidia-ml-py's `pynvml` (no GPU and no NVML here): two devices whose
    readings are set below; the second does not support power readings, as some boards."""

    NVML_TEMPERATURE_GPU = 0

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.initialised = False

    def nvmlInit(self) -> None:  # pynvml's names
        self.initialised = True

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        return {"GPU-b": 1}[uuid]

    def nvmlDeviceGetUtilizationRates(self, handle: int):
        return types.SimpleNamespace(gpu=[37, 90][handle], memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: int):
        return types.SimpleNamespace(used=[3 * GIB, GIB // 2][handle], total=80 * GIB)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        if handle == 1:
            raise RuntimeError("Not Supported")
        return 215_500  # milliwatts

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return [61, 48][handle]


@pytest.fixture
def nvml(monkeypatch):
    stand_in = _StandInNVML()
    monkeypatch.setitem(sys.modules, "pynvml", stand_in)
    return stand_in


def _one_sample(caplog) -> tuple[SystemSampler, dict[str, float]]:
    samples: list[dict[str, float]] = []
    sampler = SystemSampler(samples.append, interval=0.05, gpus=True)
    with caplog.at_level(logging.WARNING, logger="worker.training.system_metrics"):
        sampler.start()
        wait_for(lambda: len(samples) >= 2)
        sampler.stop()
    return sampler, samples[-1]


def test_every_visible_gpu_gets_its_four_readings(nvml, monkeypatch, caplog):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    sampler, values = _one_sample(caplog)

    assert nvml.initialised
    gpu = {k: v for k, v in values.items() if k.startswith("system/gpu")}
    assert gpu == {
        "system/gpu0/util_percent": 37.0, "system/gpu0/memory_gib": 3.0, "system/gpu0/power_w": 215.5,
        "system/gpu0/temp_c": 61.0,
        "system/gpu1/util_percent": 90.0, "system/gpu1/memory_gib": 0.5, "system/gpu1/temp_c": 48.0,
    }
    # The unsupported reading is left out each time, and said once.
    assert sampler.errors >= 2
    assert [r.getMessage() for r in caplog.records] == [
        "system metrics: RuntimeError: Not Supported (later errors are not logged)"
    ]


def test_the_gpus_are_those_cuda_visible_devices_names_in_its_order(nvml, monkeypatch, caplog):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-b")

    _, values = _one_sample(caplog)

    assert {k: v for k, v in values.items() if k.startswith("system/gpu")} == {
        "system/gpu0/util_percent": 90.0, "system/gpu0/memory_gib": 0.5, "system/gpu0/temp_c": 48.0,
    }


def test_without_nvidia_ml_py_there_are_no_gpu_metrics(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # an import of it raises ImportError

    sampler, values = _one_sample(caplog)

    assert set(values) == {"system/cpu_percent", "system/rss_gib", "system/process_threads"}
    assert sampler.errors == 0


def test_a_record_that_fails_never_stops_the_sampler_and_is_logged_once(caplog):
    calls: list[int] = []

    def refuse(values: dict[str, float]) -> None:
        calls.append(1)
        raise ConnectionError("database away")

    sampler = SystemSampler(refuse, interval=0.02, gpus=False)
    with caplog.at_level(logging.WARNING, logger="worker.training.system_metrics"):
        sampler.start()
        wait_for(lambda: len(calls) >= 3)
        sampler.stop()

    assert len(calls) >= 3 and sampler.errors == len(calls)
    assert [r.getMessage() for r in caplog.records] == [
        "system metrics: ConnectionError: database away (later errors are not logged)"
    ]
