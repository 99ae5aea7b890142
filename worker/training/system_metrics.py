"""System metrics of a training process, recorded like any metric through the telemetry sink:
`system/cpu_percent` (of one core: 400 is four cores busy), `system/rss_gib`,
`system/process_threads`, and on CUDA, per GPU the process sees,
`system/gpu<i>/util_percent|memory_gib|power_w|temp_c` (NVML, from nvidia-ml-py in the `gpu`
extra; without it, no GPU metrics). With several training processes every one samples its
own process; the first (it holds the sink) records its own values as above and every GPU of
the run's, and each other process's newest sample travels to it with the step's tool counts,
recorded as `system/rank<r>/cpu_percent|rss_gib|process_threads`.

A daemon thread samples every ENVLAB_SYSTEM_METRICS_SECONDS (and once more at the end) and
hands the values to the sink at the last step done (the step the run page shows), without a wall time of its own: the
step's wall time stays the one its training metrics logged. It never slows or stops
training: the sink's queue takes the values without waiting, and any error is swallowed,
the first one into one log line.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

GIB = 2**30
Record = Callable[[dict[str, float]], None]
# (metric name, reading from pynvml and a device handle): NVML gives milliwatts and bytes.
GPU_READINGS: tuple[tuple[str, Callable[[Any, Any], float]], ...] = (
    ("util_percent", lambda nvml, h: nvml.nvmlDeviceGetUtilizationRates(h).gpu),
    ("memory_gib", lambda nvml, h: nvml.nvmlDeviceGetMemoryInfo(h).used / GIB),
    ("power_w", lambda nvml, h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
    ("temp_c", lambda nvml, h: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)),
)


def _nvml() -> Any:
    """pynvml (nvidia-ml-py), initialised, or None where it is not installed or finds no driver."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # no driver, no device: no GPU metrics
        log.info("system metrics: NVML unavailable (%s); no GPU metrics", exc)
        return None
    return pynvml


def _visible_handles(nvml: Any) -> list[Any]:
    """The process's GPUs in CUDA's order: CUDA_VISIBLE_DEVICES (indices or UUIDs) where set."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    handles = []
    for entry in (part.strip() for part in visible.split(",")):
        if not entry:
            continue
        if entry.isdigit():
            handles.append(nvml.nvmlDeviceGetHandleByIndex(int(entry)))
        else:
            handles.append(nvml.nvmlDeviceGetHandleByUUID(entry))
    return handles


def _cuda_in_use() -> bool:
    torch = sys.modules.get("torch")  # never imported here: training has it, or there is no CUDA
    try:
        return bool(torch is not None and torch.cuda.is_available())
    except Exception:
        return False


class LatestSample:
    """The newest values a sampler took, held until the next step end takes them: a training
    process that records nothing itself (not the first of several) hands them to the first
    with the step's other counts (worker/training/runner.py TelemetryCallback)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, float] | None = None

    def put(self, values: dict[str, float]) -> None:
        with self._lock:
            self._values = dict(values)

    def take(self) -> dict[str, float] | None:
        with self._lock:
            values, self._values = self._values, None
        return values


def rank_metrics(rank: int, values: dict[str, float]) -> dict[str, float]:
    """Another training process's sample under keys of its own: `system/rank<r>/cpu_percent`..."""
    return {f"system/rank{rank}/{key.removeprefix('system/')}": value for key, value in values.items()}


class SystemSampler:
    """Call `start()` once training's sink exists and `stop()` before it closes."""

    def __init__(self, record: Record, *, interval: float, gpus: bool | None = None) -> None:
        self.record = record
        self.interval = interval
        self._gpus = gpus
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process: Any = None
        self._nvml: Any = None
        self._handles: list[Any] = []
        self.errors = 0

    def start(self) -> None:
        if self.interval <= 0:
            return
        self._thread = threading.Thread(target=self._run, name="system-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def _setup(self) -> None:
        import psutil

        self._process = psutil.Process()
        self._process.cpu_percent(None)  # the first reading is 0.0: it starts the measurement
        if self._gpus if self._gpus is not None else _cuda_in_use():
            self._nvml = _nvml()
            if self._nvml is not None:
                self._handles = _visible_handles(self._nvml)

    def _run(self) -> None:
        try:
            self._setup()
        except Exception as exc:
            self._failed(exc)
            return
        # The first sample soon, then every `interval`, and one more when training ends: a run
        # shorter than the first wait (a warm worker trains a tiny model's steps in under a
        # second) has one too, its CPU share measured over the whole run.
        wait = min(self.interval, 1.0)
        while not self._stop.wait(wait):
            wait = self.interval
            self._record_sample()
        self._record_sample()

    def _record_sample(self) -> None:
        try:
            values = self.sample()
            if values:
                self.record(values)
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        self.errors += 1
        if self.errors == 1:
            log.warning("system metrics: %s: %s (later errors are not logged)", type(exc).__name__, exc)

    def sample(self) -> dict[str, float]:
        values: dict[str, float] = {}
        process = self._process
        if process is not None:
            with process.oneshot():
                values["system/cpu_percent"] = float(process.cpu_percent(None))
                values["system/rss_gib"] = process.memory_info().rss / GIB
                values["system/process_threads"] = float(process.num_threads())
        for i, handle in enumerate(self._handles):
            for name, read in GPU_READINGS:
                try:
                    values[f"system/gpu{i}/{name}"] = float(read(self._nvml, handle))
                except Exception as exc:  # a reading this GPU does not support (power on some boards)
                    self._failed(exc)
        return values
