"""Real services for end-to-end tests: a Celery worker and the ASGI web server, started
as subprocesses against the test database and the tests' Redis database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

REPO_ROOT = Path(__file__).resolve().parents[2]
# In the var dir of this test run: `make test` gives its SQLite pass, which runs beside the
# PostgreSQL pass, a var dir of its own (scripts/run_tests.py).
LOG_DIR = Path(os.environ.get("ENVLAB_VAR_DIR") or REPO_ROOT / "var") / "test-logs"
# The Celery queues the tests' workers take (start_worker's default).
TASK_QUEUES = ("train", "default")
# Every worker start_worker started in this session, in order (a stopped one is skipped by frozen_workers).
WORKERS: list[Service] = []


def fresh_python(code: str, *, timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `code` in a new interpreter in the repository root and return what it printed: only
    a process that has imported nothing yet shows what a module pulls in, as a server's would."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )


def modules_imported(imports: str, packages: set[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    """Import the comma-separated `imports` in a fresh interpreter, which prints the sorted names
    of the modules of `packages` that came with them: "[]" when a layer keeps clear of them."""
    code = (
        f"import sys, {imports}; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(packages)!r}))"
    )
    return fresh_python(code, timeout=timeout)


def test_database_url() -> str:
    """The database the test process uses, as a URL subprocesses can be pointed at."""
    s = connection.settings_dict
    if s["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{Path(s['NAME']).resolve()}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def service_env(**extra: str) -> dict[str, str]:
    from django.conf import settings

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.test",
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "ENVLAB_MODELS_DIR": str(settings.MODELS_DIR),
        "ENVLAB_RUNS_DIR": str(settings.RUNS_DIR),
        "ENVLAB_STALE_SECONDS": str(settings.ENVLAB_STALE_SECONDS),
        "ENVLAB_INTERRUPT_SECONDS": str(settings.ENVLAB_INTERRUPT_SECONDS),
        "ENVLAB_ENV_OUTAGE_SECONDS": str(settings.ENVLAB_ENV_OUTAGE_SECONDS),
        "ENVLAB_TORCH_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(REPO_ROOT),
    }
    env.update(extra)
    return env


class Service:
    """A subprocess with its log in var/test-logs/<name>.log."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]) -> None:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log_path = LOG_DIR / f"{name}.log"
        self._log = open(self.log_path, "w")  # closed in stop()
        self.args = args
        self.env = env
        self.process = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.args,
            cwd=REPO_ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.process.returncode}:\n{self.log_text()[-4000:]}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.name}: {what} not seen in {timeout:g} s:\n{self.log_text()[-4000:]}"
                )
            time.sleep(0.2)

    def restart(self, ready: Callable[[], bool], timeout: float = 60) -> None:
        """Start the same command again (after it was killed), appending to the log."""
        if self.process.poll() is None:
            raise RuntimeError(f"{self.name} is still running")
        self.process = self._spawn()
        self.wait_until(ready, timeout, "ready")

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(timeout=10)
        self._log.close()


def start_worker(name: str = "worker", *, queues: str = "train,default", **env: str) -> Service:
    service = Service(
        name,
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "worker.celery_app",
            "worker",
            "-Q",
            queues,
            "--concurrency",
            "1",
            "--prefetch-multiplier",
            "1",
            "--loglevel",
            "INFO",
            "--hostname",
            f"{name}@%h",
            "--without-gossip",
            "--without-mingle",
        ],
        service_env(**env),
    )
    service.wait_until(lambda: worker_ready(service), 60, "'ready.'")
    WORKERS.append(service)
    return service


def purge_task_queues() -> int:
    """Drop the tasks waiting in the tests' queues (only those, not Redis's other keys); how many."""
    from webapp import celery_app

    with celery_app.connection_for_write() as connection:
        return sum(connection.default_channel.queue_purge(queue) or 0 for queue in TASK_QUEUES)


@contextmanager
def frozen_workers() -> Iterator[list[Service]]:
    """Every live worker of this session stopped in place (SIGSTOP to its process group: the
    worker and the processes it trains in) while a test looks at queued work that a worker
    would otherwise claim at once. On the way out the tasks the test queued are purged
    before the workers go on. A frozen worker's pending read may already hold one of them:
    a test that leaves work claimable (a queued run) withdraws it before it ends."""
    live = [service for service in WORKERS if service.process.poll() is None]
    for service in live:
        os.killpg(service.process.pid, signal.SIGSTOP)
    try:
        yield live
    finally:
        try:
            purge_task_queues()
        finally:
            for service in live:
                if service.process.poll() is None:
                    os.killpg(service.process.pid, signal.SIGCONT)


def worker_ready(service: Service, after: int = 0) -> bool:
    """Whether the worker logged 'ready.' after character offset `after` of its log."""
    return " ready." in service.log_text()[after:]


@contextmanager
def worker_in_place_of(worker: Service, name: str, **env: str) -> Iterator[Service]:
    """``worker`` (the session's) stopped for a worker ``name`` started with ``env`` (settings it
    reads at start), which is stopped afterwards and ``worker`` started again: two workers
    would race for the same runs."""
    os.killpg(worker.process.pid, signal.SIGTERM)
    worker.process.wait(30)
    service = start_worker(name, **env)
    try:
        yield service
    finally:
        service.stop()
        offset = len(worker.log_text())
        worker.restart(lambda: worker_ready(worker, offset))


def start_web(port: int, *, name: str = "web", **env: str) -> Service:
    service = Service(
        name,
        [
            sys.executable,
            "-m",
            "uvicorn",
            "webapp.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        service_env(**env),
    )

    def up() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    service.wait_until(up, 60, "HTTP 200 on /login/")
    return service


def worker_child_pids(service: Service) -> list[int]:
    """The prefork pool children of a worker (the processes that train)."""
    out = subprocess.run(["pgrep", "-P", str(service.process.pid)], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]
