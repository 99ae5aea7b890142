"""Loopback ports for the servers the lab starts itself (bundled environments, a managed vLLM
server, training processes' rendezvous): the one place that picks them."""

from __future__ import annotations

import socket

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago: another process may take it before
    the caller binds it, so a server started on it is waited for, not assumed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])
