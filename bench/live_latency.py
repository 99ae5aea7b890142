"""Live latency: from the moment the trainer hands a step's metrics to the telemetry sink
to their receipt by 20 WebSocket clients of the real ASGI server (database write, Redis
channel layer, consumer, socket). Baseline in the same run: a bare channel-layer
group_send to one in-process receiver (no database, no WebSocket). Target: p99 <= 100 ms."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

CLIENTS = 20
EVENTS = 150
INTERVAL = 0.05  # 20 steps a second: faster than the tiny demo model trains


def _baseline(events: int) -> list[float]:
    from channels.layers import channel_layers

    layer = channel_layers.make_backend("default")
    samples: list[float] = []

    async def go() -> None:
        channel = await layer.new_channel()
        await layer.group_add("bench-baseline", channel)
        for _ in range(events):
            sent = time.time()
            await layer.group_send("bench-baseline", {"type": "x", "sent": sent})
            message = await layer.receive(channel)
            samples.append(time.time() - message["sent"])
            await asyncio.sleep(INTERVAL)
        await layer.group_discard("bench-baseline", channel)

    asyncio.run(go())
    return samples


async def _clients(url: str, headers: dict[str, str], expected: int, ready: threading.Event,
                   samples: list[float]) -> None:
    from websockets.asyncio.client import connect

    async def one() -> None:
        async with connect(url, additional_headers=headers, open_timeout=20, max_size=2**22) as socket:
            snapshot = json.loads(await socket.recv())
            assert snapshot["type"] == "snapshot", snapshot
            counter["connected"] += 1
            if counter["connected"] == CLIENTS:
                ready.set()
            seen = 0
            while seen < expected:
                message = json.loads(await asyncio.wait_for(socket.recv(), 30))
                if message.get("type") == "metrics" and "bench/sent" in message.get("values", {}):
                    samples.append(time.time() - message["values"]["bench/sent"])
                    seen += 1

    counter = {"connected": 0}
    await asyncio.gather(*(one() for _ in range(CLIENTS)))


def main() -> dict[str, Any]:
    from django.contrib.auth.models import User
    from django.test import Client

    from bench.common import percentile
    from tests.envs.servers import free_port
    from tests.support.processes import start_web
    from webapp.runs.models import Run
    from webapp.runs.services import run_claim
    from worker.training.telemetry import TelemetrySink

    baseline = _baseline(EVENTS)
    user = User.objects.create_user("bench-live", password="bench")
    run = Run.objects.create(owner=user, name="bench-live", config={}, model="demo:echo", max_steps=EVENTS)
    run_claim(run_id=run.pk, lease_owner="bench", worker_name="bench")
    client = Client()
    client.force_login(user)
    port = free_port()
    web = start_web(port, DJANGO_SETTINGS_MODULE="webapp.settings.local")
    samples: list[float] = []
    try:
        ready = threading.Event()
        headers = {"Cookie": f"sessionid={client.cookies['sessionid'].value}",
                   "Origin": f"http://127.0.0.1:{port}"}
        url = f"ws://127.0.0.1:{port}/ws/runs/{run.pk}/"
        errors: list[BaseException] = []

        def run_clients() -> None:
            try:
                asyncio.run(_clients(url, headers, EVENTS, ready, samples))
            except BaseException as exc:  # reported below
                errors.append(exc)
                ready.set()

        thread = threading.Thread(target=run_clients, daemon=True)
        thread.start()
        if not ready.wait(60) or errors:
            raise RuntimeError(f"clients did not connect: {errors}")
        sink = TelemetrySink(run_id=run.pk, lease_owner="bench", heartbeat_seconds=2.0)
        for step in range(1, EVENTS + 1):
            sink.metrics(step, {"reward": step / EVENTS, "loss": 0.1, "bench/sent": time.time()})
            time.sleep(INTERVAL)
        sink.close(timeout=30)
        thread.join(60)
        if errors:
            raise RuntimeError(f"clients failed: {errors[0]!r}")
    finally:
        web.stop()
    p50, p99 = percentile(samples, 50) * 1000, percentile(samples, 99) * 1000
    b50, b99 = percentile(baseline, 50) * 1000, percentile(baseline, 99) * 1000
    return {
        "benchmark": "live_latency",
        "clients": CLIENTS,
        "events": EVENTS,
        "samples": len(samples),
        "p50_ms": round(p50, 2),
        "p99_ms": round(p99, 2),
        "baseline_p50_ms": round(b50, 2),
        "baseline_p99_ms": round(b99, 2),
        "ratio_p99_vs_baseline": round(p99 / b99, 2) if b99 else None,
        "target_p99_ms": 100,
        "pass": p99 <= 100,
    }
