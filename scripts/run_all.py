"""`make run`: the web server, a training worker, a light worker with the embedded beat
scheduler, and (through `manage.py envlab_setup`) the bundled environment servers, on the
embedded defaults. Ctrl-C stops them all. Logs go to var/log/ (servers: var/log/envs/).

- web: uvicorn serving webapp.asgi
- worker-train: Celery, queue `train` (and the GPU queues where this machine has GPUs), one run at a time
- worker-default: Celery, queue `default` (probes, dry runs, the bundled-server supervisor)
  with beat embedded (-B), its schedule in var/celerybeat-schedule
- bundled servers: started (or adopted) by `envlab_setup`, watched by the supervisor task,
  stopped with `envlab_setup --stop-bundled` on exit. They run in their own sessions, so
  they outlive a crash of this script; the next `make run` adopts them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from run_worker import training_queues, worker_command

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
WEB_PORT = int(os.environ.get("ENVLAB_PORT", "8000"))
USERNAME = os.environ.get("ENVLAB_DEMO_USER", "demo")
# Empty: a new demo login gets a random password, kept in var/demo-login and printed again.
PASSWORD = os.environ.get("ENVLAB_DEMO_PASSWORD", "")
VAR = Path(os.environ.get("ENVLAB_VAR_DIR", ROOT / "var"))


def start(name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    log_dir = VAR / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
    print(f"  starting {name}: logs in {log_dir / f'{name}.log'}")
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def celery(queue: str, *extra: str) -> list[str]:
    return [PY, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", queue,
            "-n", f"{queue}@%h", "--concurrency", "1", "--prefetch-multiplier", "1",
            "--loglevel", "INFO", *extra]


def login_text() -> str:
    stored = VAR / "demo-login"
    password = stored.read_text().strip() if stored.exists() else ""
    return f"login: {USERNAME} / {password}" if password else f"login: {USERNAME}, with the password you set"


def stop_processes(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    for proc in processes.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for proc in processes.values():
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.local")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    processes = {
        "web": start("web", [PY, "-m", "uvicorn", "webapp.asgi:application", "--host", "127.0.0.1",
                             "--port", str(WEB_PORT)], env),
        # Every training queue this machine can carry (webapp/runs/routing.py): `train` on CPU.
        "worker-train": start("worker-train", worker_command(training_queues(env)), env),
        "worker-default": start("worker-default", celery(
            "default", "-B", "-s", str(VAR / "celerybeat-schedule")), env),
    }
    # Starts every bundled server and registers it; prints one line per server.
    setup = subprocess.run(
        [PY, "manage.py", "envlab_setup", "--username", USERNAME, *(["--password", PASSWORD] if PASSWORD else [])],
        cwd=ROOT, env=env,
    )
    if setup.returncode != 0:
        print("setup failed; see the message above", file=sys.stderr)
    print(f"\nenvlab is running: http://127.0.0.1:{WEB_PORT}/  ({login_text()})")
    print("Press Ctrl-C to stop.\n")
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    restarts: dict[str, int] = {}
    try:
        while not stopping:
            for name, proc in list(processes.items()):
                if proc.poll() is not None and not stopping:
                    restarts[name] = restarts.get(name, 0) + 1
                    print(f"  {name} exited with {proc.returncode}; see {VAR / 'log' / name}.log",
                          file=sys.stderr)
                    if restarts[name] > 5:
                        print(f"  {name} keeps failing; stopping", file=sys.stderr)
                        stopping = True
                        break
                    processes[name] = start(name, list(proc.args), env)  # type: ignore[arg-type]
            time.sleep(1)
    finally:
        # The supervisor (in worker-default) goes first, so nothing restarts what we stop next.
        stop_processes(processes)
        print("  stopping the bundled environment servers")
        subprocess.run([PY, "manage.py", "envlab_setup", "--stop-bundled"], cwd=ROOT, env=env,
                       stdout=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
