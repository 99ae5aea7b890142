"""Episode WebSockets connect only to an address the lab checked (security review N1).

openenv's client opens its socket with websockets' `connect(url)`, which resolves the name
again (and honours HTTP(S)_PROXY): a name that resolved to a public address when the URL was
checked could point at 127.0.0.1 by the time an episode starts (DNS rebinding). Here that
`connect` is given a socket from `netguard.create_connection` (resolved once, every address
checked, connected only to those) and no proxy. Installed once per process, for every openenv
client the adapters open, in the worker and in the web process's console alike.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any
from urllib.parse import urlsplit

from envs import netguard

DEFAULT_OPEN_TIMEOUT_S = 10.0


def install() -> None:
    import openenv.core.env_client as env_client

    if getattr(env_client.ws_connect, "__envlab_pinned__", False):
        return
    unpinned = env_client.ws_connect

    async def pinned_connect(uri: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("sock") is None:
            kwargs["sock"] = await checked_socket(uri, timeout=kwargs.get("open_timeout"))
            kwargs["proxy"] = None  # a proxy would be checked instead of the target
        return await unpinned(uri, *args, **kwargs)

    pinned_connect.__envlab_pinned__ = True  # type: ignore[attr-defined]  # a marker attribute on a function
    env_client.ws_connect = pinned_connect


async def checked_socket(uri: str, *, timeout: float | None) -> Any:
    """A connected, non-blocking socket to `uri`'s host, through the outbound rules (the lookup
    and connect run off the event loop: other episodes' messages go on meanwhile)."""
    parts = urlsplit(uri)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "wss" else 80)
    connect = functools.partial(netguard.create_connection, (host, port), timeout or DEFAULT_OPEN_TIMEOUT_S)
    sock = await asyncio.get_running_loop().run_in_executor(None, connect)
    sock.setblocking(False)
    return sock
