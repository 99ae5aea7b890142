"""`envlab-server`: the lab from an installed wheel, as `make run` runs it from a clone.

    envlab-server setup     the database's tables and the offline demo model (run once, and after an upgrade)
    envlab-server check     what the lab needs, each on a line; exit 0 only when all of it is there
    envlab-server run       web, a training worker, a light worker with the beat scheduler, and the
                            bundled environment servers; Ctrl-C stops them all
    envlab-server web       the web server alone (uvicorn)
    envlab-server worker    a training worker for the queues this machine can carry (GPU hosts);
                            extra arguments go to `celery worker`

State (database, runs, models, logs) lives in ENVLAB_VAR_DIR: by default the clone's var/ when
run from a checkout, else the user's data folder (webapp/settings/env.py default_var_dir).
Settings default to webapp.settings.local (SQLite, DEBUG off, static files served by the web
process); DJANGO_SETTINGS_MODULE, DATABASE_URL and REDIS_URL choose others.

The web app imports no training code: workers are started by command line (`celery -A
worker.celery_app`), never imported here.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

PY = sys.executable
DEFAULT_SETTINGS = "webapp.settings.local"
# Logs of `run`'s processes are in VAR_DIR/log/ (bundled servers: VAR_DIR/log/envs/).
RESTARTS_BEFORE_GIVING_UP = 5


def lab_environment() -> dict[str, str]:
    """The environment every process of the lab starts with."""
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", DEFAULT_SETTINGS)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", DEFAULT_SETTINGS)
    import django

    django.setup()


def _code_root() -> Path:
    """The folder holding webapp/, worker/ and envs/ (the clone, or site-packages)."""
    return Path(__file__).resolve().parent.parent


def _var_dir() -> Path:
    from django.conf import settings

    return Path(settings.VAR_DIR)


# --- commands that start processes -------------------------------------------------------


def training_queues(env: dict[str, str]) -> list[str]:
    """Asked in a child with Django set up: the same code the worker's heartbeat runs."""
    code = (
        "import django; django.setup(); from worker.celery_app import training_queues; "
        "print(','.join(training_queues()))"
    )
    out = subprocess.run([PY, "-c", code], cwd=_code_root(), env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1].split(",")


def worker_command(queues: Sequence[str], *, name: str = "train", extra: Sequence[str] = ()) -> list[str]:
    return [PY, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", ",".join(queues),
            "-n", f"{name}@%h", "--concurrency", "1", "--prefetch-multiplier", "1",
            "--loglevel", "INFO", *extra]


def web_command(host: str, port: int) -> list[str]:
    return [PY, "-m", "uvicorn", "webapp.asgi:application", "--host", host, "--port", str(port)]


def manage_command(*args: str) -> list[str]:
    """A Django management command in a child (`python -m django` with the lab's settings)."""
    return [PY, "-m", "django", *args]


def _start(name: str, args: list[str], env: dict[str, str], log_dir: Path) -> subprocess.Popen[bytes]:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"{name}.log", "ab")  # lives as long as the process
    print(f"  starting {name}: logs in {log_dir / f'{name}.log'}", flush=True)
    return subprocess.Popen(args, cwd=_code_root(), env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop_processes(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    for proc in processes.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for proc in processes.values():
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _supervise(processes: dict[str, subprocess.Popen[bytes]], env: dict[str, str], log_dir: Path) -> None:
    """Restart a process that exits, until Ctrl-C (or one keeps failing)."""
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    restarts: dict[str, int] = {}
    while not stopping:
        for name, proc in list(processes.items()):
            if proc.poll() is not None and not stopping:
                restarts[name] = restarts.get(name, 0) + 1
                print(f"  {name} exited with {proc.returncode}; see {log_dir / name}.log", file=sys.stderr)
                if restarts[name] > RESTARTS_BEFORE_GIVING_UP:
                    print(f"  {name} keeps failing; stopping", file=sys.stderr)
                    stopping = True
                    break
                processes[name] = _start(name, list(proc.args), env, log_dir)  # type: ignore[arg-type]
        time.sleep(1)


def _login_text(var: Path, username: str) -> str:
    stored = var / "demo-login"
    password = stored.read_text().strip() if stored.exists() else ""
    return f"login: {username} / {password}" if password else f"login: {username}, with the password you set"


def cmd_run(args: argparse.Namespace) -> int:
    """Web, a training worker, a light worker with beat embedded, and (through `envlab_setup`) the
    bundled environment servers. The servers run in their own sessions, so they outlive a crash
    of this command; the next `run` adopts them."""
    env = lab_environment()
    _django()
    var = _var_dir()
    log_dir = var / "log"
    processes = {
        "web": _start("web", web_command(args.host, args.port), env, log_dir),
        # Every training queue this machine can carry (webapp/runs/routing.py): `train` on CPU.
        "worker-train": _start("worker-train", worker_command(training_queues(env)), env, log_dir),
        # Probes, dry runs and the bundled-server supervisor, with the beat scheduler (-B).
        "worker-default": _start("worker-default", worker_command(
            ["default"], name="default", extra=("-B", "-s", str(var / "celerybeat-schedule"))), env, log_dir),
    }
    try:
        # Starts every bundled server and registers it; prints one line per server.
        setup = subprocess.run(
            manage_command("envlab_setup", "--username", args.username,
                           *(["--password", args.password] if args.password else [])),
            cwd=_code_root(), env=env,
        )
        if setup.returncode != 0:
            print("setup failed; see the message above", file=sys.stderr)
        print(f"\nenvlab is running: http://{args.host}:{args.port}/  ({_login_text(var, args.username)})")
        print("Press Ctrl-C to stop.\n", flush=True)
        _supervise(processes, env, log_dir)
    finally:
        # The supervisor (in worker-default) goes first, so nothing restarts what we stop next.
        _stop_processes(processes)
        print("  stopping the bundled environment servers")
        subprocess.run(manage_command("envlab_setup", "--stop-bundled"), cwd=_code_root(), env=env,
                       stdout=subprocess.DEVNULL)
    return 0


def cmd_web(args: argparse.Namespace) -> int:
    env = lab_environment()
    return subprocess.call(web_command(args.host, args.port), cwd=_code_root(), env=env)


def cmd_worker(args: argparse.Namespace, extra: Sequence[str]) -> int:
    env = lab_environment()
    queues = training_queues(env)
    print(f"training worker for queues: {', '.join(queues)}", flush=True)
    return subprocess.call(worker_command(queues, extra=extra), cwd=_code_root(), env=env)


# --- setup and check ---------------------------------------------------------------------


def cmd_setup(args: argparse.Namespace) -> int:
    _django()
    from django.core.management import call_command

    print(f"state in {_var_dir()}", flush=True)
    call_command("migrate", interactive=False, verbosity=1)
    if not args.no_demo_model:
        # The offline demo model (no network): what the demo run and the tests train.
        call_command("build_demo_model", "echo", if_missing=True)
    print("set up: `envlab-server check`, then `envlab-server run`")
    return 0


Check = tuple[str, Callable[[], str]]


def _check_settings() -> str:
    from django.conf import settings

    return f"{os.environ['DJANGO_SETTINGS_MODULE']} (DEBUG {'on' if settings.DEBUG else 'off'})"


def _check_code() -> str:
    return str(_code_root())


def _check_var() -> str:
    var = _var_dir()
    probe = var / ".envlab-check"
    probe.write_text("ok")
    probe.unlink()
    return f"{var} (writable)"


def _check_django() -> str:
    from django.core import checks

    messages = [m for m in checks.run_checks() if m.is_serious()]
    if messages:
        raise RuntimeError("; ".join(str(m) for m in messages))
    return "no errors"


def _check_database() -> str:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        raise RuntimeError(f"{len(pending)} migrations not applied: run `envlab-server setup`")
    return f"{connection.vendor}, migrations applied"


def _check_redis() -> str:
    import redis
    from django.conf import settings

    url = settings.CELERY_BROKER_URL
    redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    return "reachable"


def _check_pages() -> str:
    from django.contrib.staticfiles import finders
    from django.template.loader import get_template

    get_template("base.html")
    missing = [name for name in ("css/app.css", "js/run_live.js") if not finders.find(name)]
    if missing:
        raise RuntimeError(f"static files not found: {', '.join(missing)}")
    return "templates and static files found"


CHECKS: list[Check] = [
    ("settings", _check_settings),
    ("code", _check_code),
    ("state", _check_var),
    ("django", _check_django),
    ("database", _check_database),
    ("redis", _check_redis),
    ("pages", _check_pages),
]


def cmd_check(args: argparse.Namespace) -> int:
    try:
        _django()
    except Exception as exc:
        print(f"FAIL settings: {type(exc).__name__}: {exc}")
        return 1
    failed = 0
    for name, check in CHECKS:
        try:
            print(f"ok   {name}: {check()}", flush=True)
        except Exception as exc:
            failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
    return 1 if failed else 0


# --- the command line --------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="envlab-server", description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    setup = commands.add_parser("setup", help="create or upgrade the database; build the offline demo model")
    setup.add_argument("--no-demo-model", action="store_true", help="skip the demo model")
    commands.add_parser("check", help="what the lab needs, each on a line; exit 0 when all is there")
    port = int(os.environ.get("ENVLAB_PORT", "8000"))
    for name, text in (("run", "web, workers and bundled environment servers"), ("web", "the web server alone")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--host", default="127.0.0.1")
        sub.add_argument("--port", type=int, default=port)
        if name == "run":
            sub.add_argument("--username", default=os.environ.get("ENVLAB_DEMO_USER", "demo"))
            # Empty: a new demo login gets a random password, kept in VAR_DIR/demo-login.
            sub.add_argument("--password", default=os.environ.get("ENVLAB_DEMO_PASSWORD", ""))
    commands.add_parser("worker", help="a training worker (extra arguments go to celery worker)")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `worker` passes what follows it to celery untouched.
    if argv[:1] == ["worker"]:
        return cmd_worker(argparse.Namespace(command="worker"), argv[1:])
    args = parser().parse_args(argv)
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "setup": cmd_setup, "check": cmd_check, "run": cmd_run, "web": cmd_web,
    }
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
