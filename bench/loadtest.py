"""`python -m bench.loadtest` (`make loadtest`): N concurrent training runs on the bundled echo
server while WebSocket clients watch them and API readers poll their metrics and rollouts
(issue 23 item 8). Loopback only, bounded in time.

One invocation, two phases on the same installation:

1. baseline: N demo:echo GRPO runs, each trained by its own Celery worker (a worker trains
   one run at a time), no clients. Once every run has logged a step, a window of `--seconds`
   is measured; then the runs are cancelled.
2. loaded: the same N runs again, with `--clients` WebSocket clients (spread over the runs,
   connected as soon as the runs are queued) and `--readers` API readers (each polling
   `GET /api/runs/<id>/metrics/` and `/api/runs/<id>/rollouts/` in turn, every
   `--poll-interval` seconds) during the same length of window.

Measured: live latency (the trainer handing a step to the telemetry sink, stamped by the sink
as `_wall_time`, to a client's receipt; same machine, same clock), p95 per API endpoint,
errors (HTTP >= 400, exceptions, sockets closed early), lost and duplicated notes (each client
checks the `seq` numbers it received per run against the run's final `last_seq`), and the
training overhead: seconds per step inside the window, loaded against baseline.

It runs in a scratch installation of its own, like `make learning-table`: SQLite database (or
`--database-url`), runs under `<var>/loadtest/`, its own Redis database, the web server
(uvicorn), N workers and the bundled echo server, all stopped at the end; the command
re-executes itself inside it. The WebSocket clients and the API readers run in two child
processes of their own, so their Python does not share a GIL with the driver.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SCRATCH_MARK = "ENVLAB_LOADTEST_SCRATCH"
DEFAULT_REDIS_DB = 12  # the app uses 0, bench 8, the tests 9, the learning table 11
START_SECONDS = 300.0
TARGETS = {"live_p99_ms": 100.0, "api_p95_ms": 300.0, "errors": 0, "lost_notes": 0}
QUICK = {"runs": 2, "clients": 20, "readers": 5, "seconds": 60.0}
ENDPOINTS = ("metrics", "rollouts")


# --- pure parts (tests/bench/test_loadtest.py) -----------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (bench.common.percentile's rule); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def note_range(note: dict[str, Any]) -> tuple[int, int] | None:
    """The seq numbers a live note carries: a metrics note one (`seq`), a rollouts note
    `first_seq` to `seq`. Other notes (status, facts, pong) carry none."""
    if note.get("type") == "metrics" and isinstance(note.get("seq"), int):
        return note["seq"], note["seq"]
    if note.get("type") == "rollouts" and isinstance(note.get("seq"), int):
        first = note.get("first_seq", note["seq"])
        return (first if isinstance(first, int) else note["seq"]), note["seq"]
    return None


def seq_check(snapshot_seq: int, ranges: list[tuple[int, int]], final_seq: int) -> dict[str, int]:
    """What one client missed or got twice of a run's notes: it should receive every seq
    after its snapshot's (`snapshot_seq`) up to the run's final `last_seq`, once each.

    A note wholly at or below the snapshot's seq is not a duplicate: it was published while
    the consumer joined the group, and the snapshot already covers it. A seq above
    `final_seq` counts as unexpected (the run's counter says it was never written)."""
    counts: Counter[int] = Counter()
    for first, last in ranges:
        for seq in range(max(first, snapshot_seq + 1), last + 1):
            counts[seq] += 1
    expected = range(snapshot_seq + 1, final_seq + 1)
    return {
        "expected": len(expected),
        "received": sum(1 for seq in expected if counts[seq]),
        "lost": sum(1 for seq in expected if not counts[seq]),
        "duplicated": sum(n - 1 for n in counts.values() if n > 1),
        "unexpected": sum(n for seq, n in counts.items() if seq > final_seq),
    }


def seconds_per_step(points: list[tuple[int, float]], start: float, end: float) -> float | None:
    """Seconds per step from (step, wall time logged) points inside [start, end]: the time
    between the first and last point over the steps between them."""
    inside = sorted((step, wall) for step, wall in points if start <= wall <= end)
    if len(inside) < 2 or inside[-1][0] == inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) of `pid` and its live children, from /proc (Linux; None
    elsewhere or once it is gone). A Celery worker trains in its pool child."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # After the name: state, ppid, ... utime (14th field overall), stime (15th).
            if int(entry.name) == pid or int(fields[1]) == pid:
                total += (int(fields[11]) + int(fields[12])) / tick
        return total
    except (OSError, ValueError):
        return None


def run_queue_seconds(pid: int) -> float | None:
    """Seconds the threads of `pid` and its live children spent runnable but waiting for a core
    (/proc/<pid>/task/<tid>/schedstat, second field, nanoseconds; Linux only, else None)."""
    try:
        pids = [pid] + [
            int(e.name) for e in Path("/proc").iterdir()
            if e.name.isdigit() and _ppid(e) == pid
        ]
        total = 0
        for one in pids:
            for task in Path(f"/proc/{one}/task").iterdir():
                try:
                    total += int((task / "schedstat").read_text().split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        return total / 1e9
    except OSError:
        return None


def _ppid(entry: Path) -> int | None:
    try:
        return int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def summarise_ms(samples: list[float]) -> dict[str, Any]:
    def ms(q: float) -> float | None:
        value = percentile(samples, q)
        return None if value is None else round(value * 1000, 2)

    return {"count": len(samples), "p50_ms": ms(50), "p95_ms": ms(95), "p99_ms": ms(99),
            "max_ms": None if not samples else round(max(samples) * 1000, 2)}


# --- the load: child processes -----------------------------------------------------------


def clients_process(url: str, cookies: list[str], origin: str, runs: list[int], count: int,
                    stop: Any, ready: Any, out: Any) -> None:
    """`count` WebSocket clients, client i watching runs[i % len(runs)], until `stop` is set.
    Puts one dict on `out`: latencies (seconds), each client's seq ranges per run, errors."""
    from websockets.asyncio.client import connect

    results: dict[str, Any] = {"latencies": [], "clients": [], "errors": [], "loop_lag": []}
    connected = [0]

    async def one(index: int) -> None:
        run_id = runs[index % len(runs)]
        record: dict[str, Any] = {"run": run_id, "snapshot_seq": None, "ranges": [], "closed_early": False}
        results["clients"].append(record)
        headers = {"Cookie": f"sessionid={cookies[index % len(cookies)]}", "Origin": origin}
        try:
            async with connect(f"{url}/ws/runs/{run_id}/", additional_headers=headers, open_timeout=60,
                               max_size=2**22) as socket:
                snapshot = json.loads(await asyncio.wait_for(socket.recv(), 60))
                if snapshot.get("type") != "snapshot":
                    raise RuntimeError(f"first message was not a snapshot: {snapshot!r:.200}")
                record["snapshot_seq"] = int(snapshot["seq"])
                connected[0] += 1
                if connected[0] == count:
                    ready.set()
                while not stop.is_set():
                    try:
                        raw = await asyncio.wait_for(socket.recv(), 0.5)
                    except TimeoutError:
                        continue
                    received = time.time()
                    note = json.loads(raw)
                    span = note_range(note)
                    if span is None:
                        continue
                    record["ranges"].append(span)
                    wall = note.get("values", {}).get("_wall_time") if note.get("type") == "metrics" else None
                    if isinstance(wall, (int, float)):
                        results["latencies"].append(received - wall)
        except Exception as exc:  # counted as an error: a watcher lost its socket
            record["closed_early"] = True
            results["errors"].append(f"client {index} (run {run_id}): {exc!r}"[:300])
            if connected[0] + len(results["errors"]) >= count:
                ready.set()  # the driver stops waiting; the error is reported

    async def lag() -> None:
        """How late this process's event loop wakes from a 20 ms sleep: time the watchers'
        own process spent waiting for a core, which the live figure includes."""
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.02)
            results["loop_lag"].append(max(0.0, time.perf_counter() - before - 0.02))

    async def all_clients() -> None:
        await asyncio.gather(lag(), *(one(i) for i in range(count)))

    asyncio.run(all_clients())
    out.put(results)


def readers_process(url: str, token: str, runs: list[int], count: int, interval: float,
                    stop: Any, out: Any) -> None:
    """`count` API readers (threads), each polling metrics then rollouts of a run (reader i
    starts at runs[i % len(runs)] and moves on one run a request pair), until `stop` is set."""
    import requests

    latencies: dict[str, list[float]] = {name: [] for name in ENDPOINTS}
    errors: list[str] = []
    lock = threading.Lock()
    paths = {"metrics": "/api/runs/{}/metrics/?max_points=500", "rollouts": "/api/runs/{}/rollouts/?limit=20"}

    def reader(index: int) -> None:
        session = requests.Session()
        session.trust_env = False  # loopback only, never a proxy
        session.headers["Authorization"] = f"Token {token}"
        turn = index
        time.sleep(random.Random(index).uniform(0, interval))  # not all in step
        while not stop.is_set():
            run_id = runs[turn % len(runs)]
            for name in ENDPOINTS:
                started = time.perf_counter()
                try:
                    response = session.get(url + paths[name].format(run_id), timeout=30)
                    took = time.perf_counter() - started
                    ok = response.status_code < 400
                    if ok:
                        response.json()
                except Exception as exc:  # counted as an error
                    took, ok = time.perf_counter() - started, False
                    response = None
                    with lock:
                        errors.append(f"{name} run {run_id}: {exc!r}"[:300])
                with lock:
                    latencies[name].append(took)
                    if not ok and response is not None:
                        errors.append(f"{name} run {run_id}: HTTP {response.status_code}")
                stop.wait(interval)
            turn += 1

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    out.put({"latencies": latencies, "errors": errors})


# --- the driver ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    runs: int
    clients: int
    readers: int
    seconds: float
    poll_interval: float
    worker_nice: int
    quick: bool


def parse(argv: list[str]) -> tuple[Options, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="python -m bench.loadtest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=None, help="concurrent training runs (default 5; --quick 2)")
    parser.add_argument("--clients", type=int, default=None, help="WebSocket clients (default 100; --quick 20)")
    parser.add_argument("--readers", type=int, default=None, help="API readers (default 20; --quick 5)")
    parser.add_argument("--seconds", type=float, default=None, help="measured window per phase (default 300; --quick 60)")
    parser.add_argument("--poll-interval", type=float, default=1.0, help="seconds between a reader's requests")
    parser.add_argument("--quick", action="store_true", help="2 runs, 20 clients, 5 readers, 60 s (a flag given wins)")
    parser.add_argument("--output", default="", help="the JSON (default bench/results/loadtest.json, "
                        "--quick: loadtest_quick.json; both shown in BENCHMARKS.md; with --output it is not)")
    parser.add_argument("--dir", default="", help="scratch installation folder (default <var>/loadtest)")
    parser.add_argument("--redis-url", default="", help=f"Redis (default REDIS_URL's server, database {DEFAULT_REDIS_DB})")
    parser.add_argument("--worker-nice", type=int, default=0,
                        help="run the training workers at this niceness (0-19): the web server then comes first")
    parser.add_argument("--database-url", default="", help="database of the scratch installation (default: a fresh SQLite file)")
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else {"runs": 5, "clients": 100, "readers": 20, "seconds": 300.0}
    chosen = Options(
        runs=args.runs if args.runs is not None else int(defaults["runs"]),
        clients=args.clients if args.clients is not None else int(defaults["clients"]),
        readers=args.readers if args.readers is not None else int(defaults["readers"]),
        seconds=args.seconds if args.seconds is not None else float(defaults["seconds"]),
        poll_interval=args.poll_interval,
        worker_nice=args.worker_nice, quick=args.quick,
    )
    checks = [
        (1 <= chosen.runs <= 16, "--runs is 1 to 16"),
        (0 <= chosen.clients <= 1000, "--clients is 0 to 1000"),
        (0 <= chosen.readers <= 200, "--readers is 0 to 200"),
        (10 <= chosen.seconds <= 3600, "--seconds is 10 to 3600"),
        (0.05 <= chosen.poll_interval <= 60, "--poll-interval is 0.05 to 60"),
        (0 <= chosen.worker_nice <= 19, "--worker-nice is 0 to 19"),
    ]
    for ok, message in checks:
        if not ok:
            parser.error(message)
    return chosen, args


def main(argv: list[str] | None = None) -> int:
    chosen, args = parse(sys.argv[1:] if argv is None else argv)
    root = Path(__file__).resolve().parent.parent
    scratch = Path(args.dir or root / "var" / "loadtest").resolve()
    if os.environ.get(SCRATCH_MARK) != str(scratch):
        return _rerun_in_scratch(root, scratch, args, argv, runs=chosen.runs)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.local")
    import django

    django.setup()
    output = Path(args.output).resolve() if args.output else root / "bench" / "results" / "loadtest.json"
    result = _in_scratch(root, scratch, chosen)
    from bench.common import write_result

    name = "loadtest_quick" if chosen.quick else "loadtest"
    written = write_result(name, result) if not args.output else _write(output, result)
    print(f"written to {written}")
    if not args.output:
        from bench.__main__ import splice_load_sections

        splice_load_sections()
    return 0 if result["pass"] else 1


def _write(path: Path, result: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return path


def _rerun_in_scratch(root: Path, scratch: Path, args: argparse.Namespace, argv: list[str] | None, *,
                      runs: int) -> int:
    from bench.learning_table import _redis_url

    scratch.mkdir(parents=True, exist_ok=True)
    db = scratch / "db.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    redis_url = args.redis_url or _redis_url("").rsplit("/", 1)[0] + f"/{DEFAULT_REDIS_DB}"
    env = {
        **os.environ,
        SCRATCH_MARK: str(scratch),
        "DJANGO_SETTINGS_MODULE": "webapp.settings.local",
        "ENVLAB_VAR_DIR": str(scratch),
        "DATABASE_URL": args.database_url or f"sqlite:///{db}",
        "REDIS_URL": redis_url,
        # The checkout's models: demo:echo is built there once (make demo-model).
        "ENVLAB_MODELS_DIR": os.environ.get("ENVLAB_MODELS_DIR", str(root / "var" / "models")),
        "ENVLAB_RUNS_DIR": str(scratch / "runs"),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "PYTHONUNBUFFERED": "1",
        "DEBUG": "0",
        # N trainers share the machine's cores: one torch thread each.
        "ENVLAB_TORCH_THREADS": os.environ.get("ENVLAB_TORCH_THREADS", "1"),
        # One account launches every run: the per-account limit (default 4) must let N through.
        "ENVLAB_MAX_ACTIVE_RUNS": str(max(runs, int(os.environ.get("ENVLAB_MAX_ACTIVE_RUNS", "4")))),
    }
    env.pop("CELERY_BROKER_URL", None)
    given = sys.argv[1:] if argv is None else argv
    forwarded = [a for a in given if not a.startswith("--dir")]
    return subprocess.call([sys.executable, "-m", "bench.loadtest", *forwarded, "--dir", str(scratch)],
                           cwd=root, env=env)


def _config(env_id: int, index: int) -> dict[str, Any]:
    return {
        "name": f"loadtest-{index}",
        "model": "demo:echo",
        "environments": [{"environment": env_id, "name": "echo", "prompt": "Echo '{phrase}'.", "rows": 80}],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        # Far more steps than the window holds: the run is cancelled when it ends.
        "grpo": {"num_generations": 4, "max_steps": 10_000, "per_device_train_batch_size": 4,
                 "max_completion_length": 48, "max_tool_calling_iterations": 2, "learning_rate": 5e-5,
                 "save_steps": 10_000},
        "wait_for_worker": True,
    }


def _in_scratch(root: Path, scratch: Path, chosen: Options) -> dict[str, Any]:
    from django.conf import settings

    from bench.learning_table import (
        HttpApi,
        _reset_stores,
        _scratch_setup,
        _spawn,
        _stop,
        _wait,
        _web_command,
        _worker_command,
    )
    from webapp.catalog.bundled import bundled_start, bundled_stop
    from worker.demo_model import build_demo_model, demo_model_path, is_built

    started = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {message}", flush=True)

    _reset_stores()
    if not is_built(demo_model_path("echo", settings.MODELS_DIR)):
        say("building demo:echo first (minutes)")
        build_demo_model(demo_model_path("echo", settings.MODELS_DIR), variant="demo")
    token, log_dir, port = _scratch_setup(scratch)
    services: list[subprocess.Popen[bytes]] = []
    try:
        services.append(_spawn("web", _web_command(port), log_dir))
        for index in range(chosen.runs):
            nice = ["nice", "-n", str(chosen.worker_nice)] if chosen.worker_nice else []
            services.append(_spawn(f"worker-{index}", [*nice, *_worker_command(f"loadtest-{index}@%h")], log_dir))
        server = bundled_start(key="echo", capacity=max(16, 8 * chosen.runs), wait=START_SECONDS)
        if server.status != "running":
            raise RuntimeError(f"the echo server did not start: {server.last_error}")
        api = HttpApi(f"http://127.0.0.1:{port}", token)
        _wait(lambda: api.ok("/login/"), START_SECONDS, "the web server", services)
        _wait(lambda: len(api.get("/api/workers/")) >= chosen.runs, START_SECONDS,
              f"{chosen.runs} workers' heartbeats", services)
        env_id = int(api.post("/api/environments/", {"name": "echo", "base_url": server.url,
                                                      "capacity": max(16, 8 * chosen.runs)})["id"])
        say(f"scratch installation in {scratch}: web :{port}, {chosen.runs} workers, echo at {server.url}")
        baseline = _phase(api, chosen, env_id, port, load=False, say=say, services=services)
        loaded = _phase(api, chosen, env_id, port, load=True, say=say, services=services)
    finally:
        for process in reversed(services):
            _stop(process)
        bundled_stop(key="echo")
    return _result(chosen, baseline, loaded, elapsed=time.monotonic() - started)


def _sessions(count: int) -> list[str]:
    """Session cookies of the run owner for the WebSocket clients (the socket reads the
    session, as the run page's does)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.get(username="learning-table")
    cookies = []
    for _ in range(count):
        client = Client()
        client.force_login(user)
        cookies.append(client.cookies["sessionid"].value)
    return cookies


def _phase(api: Any, chosen: Options, env_id: int, port: int, *, load: bool, say: Any,
           services: list[Any]) -> dict[str, Any]:
    from bench.learning_table import _wait
    from webapp.runs.models import MetricPoint, Run
    from webapp.runs.telemetry.metric_keys import WALL_TIME_KEY

    name = "loaded" if load else "baseline"
    runs = [int(api.post("/api/runs/", _config(env_id, i))["id"]) for i in range(chosen.runs)]
    say(f"{name}: runs {runs} queued")
    context = multiprocessing.get_context("spawn")
    stop_clients, stop_readers = context.Event(), context.Event()
    clients_out, readers_out = context.Queue(), context.Queue()
    children = []
    if load and chosen.clients:
        ready = context.Event()
        cookies = _sessions(min(chosen.clients, 20))
        child = context.Process(target=clients_process, args=(
            f"ws://127.0.0.1:{port}", cookies, f"http://127.0.0.1:{port}", runs, chosen.clients,
            stop_clients, ready, clients_out), daemon=True)
        child.start()
        children.append(child)
        if not ready.wait(START_SECONDS):
            raise RuntimeError("the WebSocket clients did not connect")
        say(f"{name}: {chosen.clients} WebSocket clients connected")

    def all_stepping() -> bool:
        rows = list(Run.objects.filter(pk__in=runs).values_list("status", "step"))
        bad = [s for s, _ in rows if s in ("failed", "cancelled", "succeeded")]
        if bad:
            raise RuntimeError(f"a run ended before the window: {rows}")
        return all(s == "running" and step >= 2 for s, step in rows)

    _wait(all_stepping, START_SECONDS * 2, f"{name}: every run training", services)
    window_start = time.time()
    say(f"{name}: every run is training; measuring {chosen.seconds:g} s")
    if load and chosen.readers:
        child = context.Process(target=readers_process, args=(
            f"http://127.0.0.1:{port}", api.session.headers["Authorization"].split(" ", 1)[1], runs,
            chosen.readers, chosen.poll_interval, stop_readers, readers_out), daemon=True)
        child.start()
        children.append(child)
    cpu_before = {name: cpu_seconds(p.pid) for name, p in _named(services).items()}
    clients_before = cpu_seconds(children[0].pid) if children else None
    web_pid = services[0].pid
    web_wait_before = run_queue_seconds(web_pid)
    own_before = time.process_time()
    time.sleep(chosen.seconds)
    window_end = time.time()
    cpu_after = {name: cpu_seconds(p.pid) for name, p in _named(services).items()}
    window = window_end - window_start
    # Cores' worth of CPU each service used in the window (the machine has os.cpu_count()).
    cpu_share: dict[str, float | None] = {
        "web": _share(cpu_before.get("web"), cpu_after.get("web"), window),
        "workers": _share(
            sum(v for k, v in cpu_before.items() if k.startswith("worker") and v is not None),
            sum(v for k, v in cpu_after.items() if k.startswith("worker") and v is not None), window),
        "readers": None if not (load and chosen.readers) else _share(0.0, cpu_seconds(children[-1].pid), window),
        "driver": _share(own_before, time.process_time(), window),
        "clients": _share(clients_before, cpu_seconds(children[0].pid), window) if children else None,
        # Not CPU: the web server's time spent runnable, waiting for a core (run queue).
        "web_waiting": _share(web_wait_before, run_queue_seconds(web_pid), window),
    }
    stop_readers.set()
    readers = readers_out.get(timeout=120) if load and chosen.readers else {"latencies": {}, "errors": []}
    for run_id in runs:
        api.post(f"/api/runs/{run_id}/cancel/", {})
    _wait(lambda: not Run.objects.filter(pk__in=runs, status__in=Run.ACTIVE).exists(), START_SECONDS,
          f"{name}: the runs to stop", services)
    time.sleep(3.0)  # the last notes reach the clients
    stop_clients.set()
    clients = clients_out.get(timeout=120) if load and chosen.clients else {"latencies": [], "clients": [], "errors": []}
    for child in children:
        child.join(30)
    per_run = []
    for run_id in runs:
        run = Run.objects.get(pk=run_id)
        points = [(int(s), float(v)) for s, v in
                  MetricPoint.objects.filter(run_id=run_id, key=WALL_TIME_KEY).values_list("step", "value")]
        per_run.append({"run": run_id, "status": run.status, "last_seq": run.last_seq, "step": run.step,
                        "seconds_per_step": seconds_per_step(points, window_start, window_end)})
    say(f"{name}: done; seconds per step {[r['seconds_per_step'] for r in per_run]}")
    final = {r["run"]: r["last_seq"] for r in per_run}
    notes = Counter[str]()
    for client in clients["clients"]:
        if client["snapshot_seq"] is None:
            continue
        check = seq_check(client["snapshot_seq"], [tuple(r) for r in client["ranges"]], final[client["run"]])
        notes.update(check)
    return {
        "runs": per_run, "window_seconds": round(window_end - window_start, 1),
        "live": summarise_ms(clients["latencies"]),
        "client_loop_lag": summarise_ms(clients.get("loop_lag", [])),
        "api": {name: summarise_ms(values) for name, values in readers["latencies"].items()},
        "notes": dict(notes), "cpu_share": cpu_share, "client_errors": clients["errors"], "api_errors": readers["errors"],
    }


def _named(services: list[Any]) -> dict[str, Any]:
    """The scratch services by name: web first, then worker-0.. (the order _in_scratch starts them)."""
    return {("web" if i == 0 else f"worker-{i - 1}"): p for i, p in enumerate(services)}


def _share(before: float | None, after: float | None, seconds: float) -> float | None:
    return None if before is None or after is None or seconds <= 0 else round((after - before) / seconds, 2)


def _result(chosen: Options, baseline: dict[str, Any], loaded: dict[str, Any], *, elapsed: float) -> dict[str, Any]:
    def median_sps(phase: dict[str, Any]) -> float | None:
        values = sorted(r["seconds_per_step"] for r in phase["runs"] if r["seconds_per_step"])
        return values[len(values) // 2] if values else None

    base_sps, load_sps = median_sps(baseline), median_sps(loaded)
    overhead = round(load_sps / base_sps, 3) if base_sps and load_sps else None
    errors = len(loaded["client_errors"]) + len(loaded["api_errors"])
    lost = int(loaded["notes"].get("lost", 0))
    duplicated = int(loaded["notes"].get("duplicated", 0))
    live_p99 = loaded["live"]["p99_ms"]
    api_p95 = {name: v["p95_ms"] for name, v in loaded["api"].items()}
    checks = {
        "live_p99": live_p99 is not None and live_p99 <= TARGETS["live_p99_ms"],
        "api_p95": bool(api_p95) and all(v is not None and v <= TARGETS["api_p95_ms"] for v in api_p95.values()),
        "errors": errors == 0,
        "notes": lost == 0 and duplicated == 0 and int(loaded["notes"].get("unexpected", 0)) == 0,
    }
    note = os.environ.get("ENVLAB_BENCH_NOTE", "")
    return {
        "benchmark": "loadtest",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "settings": {"runs": chosen.runs, "clients": chosen.clients, "readers": chosen.readers,
                     "seconds": chosen.seconds, "poll_interval": chosen.poll_interval,
                     "worker_nice": chosen.worker_nice, "quick": chosen.quick},
        "database": os.environ.get("DATABASE_URL", "").split(":", 1)[0],
        "cpu_share": {"baseline": baseline["cpu_share"], "loaded": loaded["cpu_share"]},
        "live": loaded["live"],
        "client_loop_lag": loaded["client_loop_lag"],
        "api": loaded["api"],
        "errors": errors,
        "error_samples": (loaded["client_errors"] + loaded["api_errors"])[:10],
        "notes": loaded["notes"],
        "lost_notes": lost,
        "duplicated_notes": duplicated,
        "baseline_seconds_per_step": base_sps,
        "loaded_seconds_per_step": load_sps,
        "overhead_ratio": overhead,
        "baseline": baseline,
        "loaded": loaded,
        "targets": TARGETS,
        "checks": checks,
        "pass": all(checks.values()),
        "elapsed_seconds": round(elapsed, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        **({"conditions": note} if note else {}),
    }


if __name__ == "__main__":
    sys.exit(main())
