"""Loopback ports for the servers tests and scripts start: the one place that picks them."""

from __future__ import annotations

import socket

from envs.ports import HOST, free_port

__all__ = ["HOST", "free_port", "listening_socket", "url_of"]


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
