"""`make run`: the web server, one Celery worker and the bundled echo environment server,
on the embedded defaults. Ctrl-C stops them all. Logs go to var/log/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
WEB_PORT = int(os.environ.get("ENVLAB_PORT", "8000"))
ECHO_PORT = int(os.environ.get("ENVLAB_ECHO_PORT", "8101"))
USERNAME = os.environ.get("ENVLAB_DEMO_USER", "demo")
PASSWORD = os.environ.get("ENVLAB_DEMO_PASSWORD", "demo")


def start(name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    log_dir = ROOT / "var" / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
    print(f"  starting {name}: logs in var/log/{name}.log")
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.local")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    processes = {
        "echo": start("echo", [PY, "-m", "uvicorn", "envs.echo.server:app", "--host", "127.0.0.1",
                               "--port", str(ECHO_PORT), "--log-level", "warning"],
                      {**env, "MAX_CONCURRENT_ENVS": env.get("MAX_CONCURRENT_ENVS", "64")}),
        "worker": start("worker", [PY, "-m", "celery", "-A", "worker.celery_app", "worker",
                                   "-Q", "train,default", "--concurrency", "1",
                                   "--prefetch-multiplier", "1", "--loglevel", "INFO"], env),
        "web": start("web", [PY, "-m", "uvicorn", "webapp.asgi:application", "--host", "127.0.0.1",
                             "--port", str(WEB_PORT)], env),
    }
    setup = subprocess.run(
        [PY, "manage.py", "envlab_setup", "--username", USERNAME, "--password", PASSWORD,
         "--echo-url", f"http://127.0.0.1:{ECHO_PORT}"], cwd=ROOT, env=env,
    )
    if setup.returncode != 0:
        print("setup failed; see the message above and var/log/echo.log", file=sys.stderr)
    print(f"\nenvlab is running: http://127.0.0.1:{WEB_PORT}/  (login: {USERNAME} / {PASSWORD})")
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
                    print(f"  {name} exited with {proc.returncode}; see var/log/{name}.log", file=sys.stderr)
                    if restarts[name] > 5:
                        print(f"  {name} keeps failing; stopping", file=sys.stderr)
                        stopping = True
                        break
                    processes[name] = start(name, list(proc.args), env)  # type: ignore[arg-type]
            time.sleep(1)
    finally:
        for proc in processes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in processes.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
