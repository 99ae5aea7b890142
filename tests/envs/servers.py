"""Start real environment servers (uvicorn subprocesses) for tests."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from tests.support.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]


def is_healthy(url: str) -> bool:
    """Whether ``GET {url}/health`` answers 200 (never through a proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{url}/health", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def run_server_command(
    command: Sequence[str],
    url: str,
    env: dict[str, str] | None = None,
    *,
    startup_timeout: float = 30.0,
) -> Iterator[str]:
    """Run ``command`` from the repository root until ``{url}/health`` answers; yield ``url``.

    ``env`` is added to this process's environment. At exit the process is
    terminated, then killed if it lingers.
    """
    child_env = {**os.environ, **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), child_env.get("PYTHONPATH", "")) if p
    )
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(
            list(command), cwd=REPO_ROOT, env=child_env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + startup_timeout
            while not is_healthy(url):
                exited = process.poll() is not None
                if exited or time.monotonic() > deadline:
                    log.seek(0)
                    why = f"exited with {process.returncode}" if exited else "never got healthy"
                    raise RuntimeError(f"{' '.join(command)} {why}:\n{log.read()}")
                time.sleep(0.1)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@contextmanager
def run_env_server(
    module_app: str,
    env: dict[str, str] | None = None,
    *,
    port: int | None = None,
    startup_timeout: float = 30.0,
) -> Iterator[str]:
    """Serve ``module_app`` (e.g. ``"envs.echo.server:app"``) with uvicorn; yield its base URL.

    Picks a free port unless ``port`` is given (to restart a server on the same
    address) and waits up to ``startup_timeout`` seconds for ``GET /health``.
    """
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "uvicorn", module_app, "--host", "127.0.0.1"]
    command += ["--port", str(port), "--log-level", "warning"]
    with run_server_command(command, url, env, startup_timeout=startup_timeout):
        yield url


@contextmanager
def run_env_servers(
    names: Sequence[str], env: dict[str, str], *, startup_timeout: float = 90.0
) -> Iterator[dict[str, str]]:
    """One real server per environment in ``names`` (``envs.<name>.server:app``), all started at
    once (each spends seconds importing openenv); yields each name's base URL."""
    contexts = [
        run_env_server(f"envs.{name}.server:app", env, startup_timeout=startup_timeout) for name in names
    ]
    with ExitStack() as stack, ThreadPoolExecutor(len(contexts)) as pool:
        started = list(pool.map(lambda context: (context, context.__enter__()), contexts))
        for context, _url in started:
            stack.push(context.__exit__)
        yield {name: url for name, (_context, url) in zip(names, started, strict=True)}


@contextmanager
def serve_in_thread(app: Any, port: int, name: str) -> Iterator[str]:
    """``app`` on a uvicorn server in a thread of this process, on ``port``; yields its URL.
    ``name`` says which server did not start, if it does not within 20 s."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, f"the {name} server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
