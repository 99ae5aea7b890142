"""Loopback ports for the servers tests and scripts start: the one place that picks them."""

from __future__ import annotations

import socket

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago: another process may take it before
    the caller binds it, so a server started on it is waited for, not assumed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def listening_socket(backlog: int = 16) -> socket.socket:
    """A socket bound to a fresh port on 127.0.0.1 and listening, that nothing answers on:
    connections wait in its backlog until the caller accepts them (a silent or scripted
    server). The caller closes it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((HOST, 0))
    sock.listen(backlog)
    return sock


def url_of(sock: socket.socket) -> str:
    """The http URL of a socket from `listening_socket`."""
    return f"http://{HOST}:{sock.getsockname()[1]}"
