"""A PostgreSQL cluster owned by one test: initdb into a temporary folder, started on a free
port, so the test may stop the database and start it again without touching the shared
server (tests/support/redis_server.py does the same for Redis).

PostgreSQL refuses to run as root: when the tests run as root the cluster belongs to the
`postgres` system user (`runuser -u postgres`). `PgCluster.available()` says why it cannot
be made here, for a test to skip with that reason."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.envs.servers import free_port

BIN_DIRS = ("/usr/local/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin")


def _tool(name: str) -> str | None:
    for folder in BIN_DIRS:
        path = Path(folder) / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return shutil.which(name)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class PgCluster:
    """`start()` once (initdb and the server), then `stop()` / `start()` at will; `destroy()` at the end."""

    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="envlab-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self._initialised = False

    @staticmethod
    def available() -> str:
        """The empty string when a cluster can be made here, else why not."""
        if _tool("initdb") is None or _tool("pg_ctl") is None:
            return "initdb/pg_ctl not found (PostgreSQL server binaries are not installed)"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no 'postgres' user to own a cluster"
            if shutil.which("runuser") is None:
                return "running as root without runuser to start PostgreSQL as 'postgres'"
        return ""

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def database_url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def _as_owner(self, args: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args

    def _run(self, args: list[str], timeout: float = 60) -> None:
        done = subprocess.run(self._as_owner(args), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args)} exited {done.returncode}: {done.stdout}{done.stderr}"
            )

    def start(self, timeout: float = 30) -> PgCluster:
        if not self._initialised:
            if os.geteuid() == 0:
                shutil.chown(self.root, user="postgres", group="postgres")
            initdb = _tool("initdb")
            assert initdb is not None
            self._run(
                [
                    initdb,
                    "-D",
                    str(self.data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            )
            self._initialised = True
        pg_ctl = _tool("pg_ctl")
        assert pg_ctl is not None
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off"
        self._run(
            [
                pg_ctl,
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-o",
                options,
                "-w",
                "-t",
                str(int(timeout)),
                "start",
            ],
            timeout=timeout + 10,
        )
        return self

    def stop(self, timeout: float = 30) -> None:
        """Stop the server ("fast": open connections are cut, as in an outage)."""
        pg_ctl = _tool("pg_ctl")
        assert pg_ctl is not None
        self._run(
            [pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "-t", str(int(timeout)), "stop"],
            timeout=timeout + 10,
        )
        deadline = time.monotonic() + timeout
        while _listening(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL on port {self.port} still answers after stop")
            time.sleep(0.05)

    def running(self) -> bool:
        return _listening(self.port)

    def create_database(self, name: str) -> str:
        psql = _tool("psql") or "psql"
        self._run(
            [
                psql,
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-c",
                f'CREATE DATABASE "{name}"',
            ]
        )
        return self.database_url(name)

    def destroy(self) -> None:
        if self._initialised and self.running():
            try:
                self.stop()
            except RuntimeError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


def prepare_database(url: str) -> None:
    """Migrate the database at `url` and give it the user `owner` (password `owner-pass`), as
    the web and worker processes pointed at it will see it."""
    import sys

    from tests.support.processes import REPO_ROOT, service_env

    env = service_env(DATABASE_URL=url)
    for args in (
        ["migrate", "--noinput", "-v", "0"],
        [
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            "get_user_model().objects.create_user('owner', password='owner-pass')",
        ],
    ):
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"manage.py {args[0]} exited {done.returncode}: {done.stdout}{done.stderr}"
            )
