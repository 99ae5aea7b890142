"""An environment server (a real uvicorn process) that a test can SIGKILL and start again on
the same port, as the catalog's supervisor restarts a crashed bundled server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from tests.envs.servers import REPO_ROOT, is_healthy
from tests.support.ports import free_port


class EnvServerProcess:
    """`command` (by default uvicorn serving `module_app`) on `port`; `start()` waits for /health."""

    def __init__(
        self, module_app: str = "envs.echo.server:app", *, port: int | None = None, env: dict[str, str] | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = list(command) if command is not None else [
            sys.executable, "-m", "uvicorn", module_app, "--host", "127.0.0.1", "--port", str(self.port),
            "--log-level", "warning",
        ]
        self.env = {**os.environ, "ENABLE_WEB_INTERFACE": "false", **(env or {})}
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), self.env.get("PYTHONPATH", "")) if p)
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()

    def start(self, timeout: float = 60.0) -> EnvServerProcess:
        self.process = subprocess.Popen(
            self.command, cwd=REPO_ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while not is_healthy(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self._log.seek(0)
                raise RuntimeError(f"{' '.join(self.command)} did not start:\n{self._log.read().decode(errors='replace')}")
            time.sleep(0.05)
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash: no socket is closed politely."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def __enter__(self) -> EnvServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._log.close()
