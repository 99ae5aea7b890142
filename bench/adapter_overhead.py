"""What the training adapter costs over openenv's bare client, against the same echo server.

1. Tool-call round trip: one session, many `echo` calls; the adapter's `echo()` (lost-
   episode checks, counters, reward) against the bare client's `step(EchoAction)`.
2. Throughput with 64 concurrent sessions (threads, as TRL's pool runs them): whole
   episodes (reset + 3 calls). The adapter opens a fresh client at every reset, by
   design (a restarted server must not carry an old episode on). Two baselines: the bare
   client doing the same (a fresh client per episode: like for like), and the bare client
   keeping one connection per session (the cheapest possible: what the fresh-client rule
   costs).

Ratios are adapter / bare: time per call, and bare steps/s over adapter steps/s. The
target applies to the like-for-like ratios.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from bench.common import median, percentile

CALLS = 400
SESSIONS = 64
SECONDS = 10.0
TARGET = 1.2


def _server() -> Any:
    from tests.envs.servers import run_env_server

    return run_env_server(
        "envs.echo.server:app", {"MAX_CONCURRENT_ENVS": str(SESSIONS + 8), "ENABLE_WEB_INTERFACE": "false"}
    )


def _round_trips(url: str) -> dict[str, list[float]]:
    from envs.adapters import adapter_class
    from envs.echo.client import EchoEnv
    from envs.echo.models import EchoAction

    bare_times: list[float] = []
    adapter_times: list[float] = []
    with EchoEnv(base_url=url).sync() as bare:
        for i in range(CALLS):
            if i % 3 == 0:
                bare.reset(target="never said")
            started = time.perf_counter()
            bare.step(EchoAction(message=f"m{i}"))
            bare_times.append(time.perf_counter() - started)
    adapter = adapter_class(metadata_name="echo", base_url=url, env_name="echo")()
    for i in range(CALLS):
        if i % 3 == 0:
            adapter.reset(target="never said")
        started = time.perf_counter()
        adapter.echo(message=f"m{i}")
        adapter_times.append(time.perf_counter() - started)
    adapter._close()  # noqa: SLF001 - public adapter methods are the model's tools
    return {"bare": bare_times, "adapter": adapter_times}


def _throughput(url: str, mode: str) -> float:
    from envs.adapters import adapter_class
    from envs.echo.client import EchoEnv
    from envs.echo.models import EchoAction

    steps = [0] * SESSIONS
    start = threading.Barrier(SESSIONS + 1)
    stop = threading.Event()
    errors: list[str] = []

    def session(index: int) -> None:
        try:
            if mode == "adapter":
                env = adapter_class(metadata_name="echo", base_url=url, env_name="echo")()
                start.wait()
                while not stop.is_set():
                    env.reset(target="never said")
                    for j in range(3):
                        env.echo(message=f"m{j}")
                        steps[index] += 1
                env._close()  # noqa: SLF001 - public adapter methods are the model's tools
            elif mode == "bare_fresh":
                start.wait()
                while not stop.is_set():
                    with EchoEnv(base_url=url).sync() as env:
                        env.reset(target="never said")
                        for j in range(3):
                            env.step(EchoAction(message=f"m{j}"))
                            steps[index] += 1
            else:
                with EchoEnv(base_url=url).sync() as env:
                    start.wait()
                    while not stop.is_set():
                        env.reset(target="never said")
                        for j in range(3):
                            env.step(EchoAction(message=f"m{j}"))
                            steps[index] += 1
        except Exception as exc:  # reported, not hidden: a failed session invalidates the figure
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=session, args=(i,), daemon=True) for i in range(SESSIONS)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(SECONDS)
    stop.set()
    counted = sum(steps)
    elapsed = time.perf_counter() - began
    for thread in threads:
        thread.join(timeout=30)
    if errors:
        raise RuntimeError(f"{len(errors)} sessions failed, e.g. {errors[0]}")
    return counted / elapsed


def main() -> dict[str, Any]:
    with _server() as url:
        trips = _round_trips(url)
        rates = {mode: _throughput(url, mode) for mode in ("bare_persistent", "bare_fresh", "adapter")}
    bare_ms = median(trips["bare"]) * 1000
    adapter_ms = median(trips["adapter"]) * 1000
    call_ratio = adapter_ms / bare_ms
    like_ratio = rates["bare_fresh"] / rates["adapter"]
    return {
        "calls": CALLS,
        "sessions": SESSIONS,
        "seconds": SECONDS,
        "bare_call_p50_ms": round(bare_ms, 3),
        "bare_call_p99_ms": round(percentile(trips["bare"], 99) * 1000, 3),
        "adapter_call_p50_ms": round(adapter_ms, 3),
        "adapter_call_p99_ms": round(percentile(trips["adapter"], 99) * 1000, 3),
        "call_ratio": round(call_ratio, 3),
        "bare_fresh_steps_per_s": round(rates["bare_fresh"], 1),
        "bare_persistent_steps_per_s": round(rates["bare_persistent"], 1),
        "adapter_steps_per_s": round(rates["adapter"], 1),
        "throughput_ratio": round(like_ratio, 3),
        "fresh_client_cost_ratio": round(rates["bare_persistent"] / rates["adapter"], 3),
        "target": TARGET,
        "pass": call_ratio <= TARGET and like_ratio <= TARGET,
    }
