"""A Redis server owned by the test run (`make test` starts one on a free port), so that a
test may stop it and start it again without touching anybody else's Redis."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
OWNED_FLAG = "ENVLAB_TEST_REDIS_OWNED"


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(port: int, timeout: float = 10.0) -> None:
    data = REPO_ROOT / "var" / "test-redis"
    data.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "yes",
            "--dir",
            str(data),
            "--logfile",
            str(data / f"redis-{port}.log"),
        ],
        check=True,
    )
    deadline = time.monotonic() + timeout
    while not _ping(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"redis-server on port {port} did not start")
        time.sleep(0.05)


def stop_redis(port: int, timeout: float = 10.0) -> None:
    subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True)
    deadline = time.monotonic() + timeout
    while _ping(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"redis-server on port {port} did not stop")
        time.sleep(0.05)


def owned_redis_port() -> int | None:
    """The port of the test run's own Redis, or None when the tests share someone's Redis."""
    if os.environ.get(OWNED_FLAG) != "1":
        return None
    url = os.environ["REDIS_URL"]
    return int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
