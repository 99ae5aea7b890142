"""Reading JSON from an environment server within limits: checked addresses, no redirect,
a body cap (ENVLAB_MAX_RESPONSE_BYTES) and one deadline per probe (ENVLAB_PROBE_DEADLINE).

The deadline covers every request of a probe; a watchdog shuts the probe's sockets when
it passes, so a server that drips its headers or body cannot stretch it.

A server that cannot be read gets one message, whatever the cause (refused, silent,
redirected, an HTTP error, too large, not JSON): telling them apart would let a user map
which ports answer on hosts the lab can reach.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings

from envs import netguard

_CHUNK = 64 * 1024


class ProbeError(Exception):
    """The server could not be read as an environment; the message says why."""


class ServerUnreadable(ProbeError):
    """No usable answer: the one message that does not say why."""

    def __init__(self, base_url: str) -> None:
        super().__init__(
            f"the server at {base_url} could not be read as an environment server "
            "(no answer, refused, timed out, redirected, too large or not JSON)"
        )


class ServerAnsweredStatus(ServerUnreadable):
    """An HTTP error status (4xx, 5xx): the same message, with the status kept for a caller
    that already knows the server answers (its `/health` did) to say what is missing."""

    def __init__(self, base_url: str, status: int) -> None:
        super().__init__(base_url)
        self.status = status


def normalise_base_url(url: str, timeout: float | None = None) -> str:
    """The URL without a trailing slash, once its form and addresses pass `netguard`; the
    name's lookup is given up after `timeout` seconds (default ENVLAB_PROBE_DEADLINE)."""
    limit = float(settings.ENVLAB_PROBE_DEADLINE) if timeout is None else timeout
    try:
        return netguard.check_outbound_url(url, name="base_url", timeout=limit)
    except netguard.OutboundRefused as exc:
        raise ProbeError(str(exc)) from None


def probe_timeout(timeout: float | None) -> float:
    return float(settings.ENVLAB_PROBE_TIMEOUT if timeout is None else timeout)


class ProbeSession:
    """One probe of one server: its requests share one deadline and one `/health` answer.

    Use as a context manager: the watchdog runs from enter to exit.
    """

    def __init__(self, base_url: str, timeout: float | None) -> None:
        budget = float(settings.ENVLAB_PROBE_DEADLINE)
        self.ends = time.monotonic() + budget
        # The name's lookup counts against the deadline too (security review K4), and so do
        # the lookups of each connection (their timeout is what is left).
        self.base_url = normalise_base_url(base_url, timeout=budget)
        self.per_request = probe_timeout(timeout)
        self.health: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._sockets: list[Any] = []
        self._watchdog = threading.Timer(budget, self._cut)
        self._watchdog.daemon = True
        self._opener = netguard.opener(on_socket=self._track)

    def __enter__(self) -> ProbeSession:
        self._watchdog.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._watchdog.cancel()

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.ends

    def _track(self, sock: Any) -> None:
        with self._lock:
            self._sockets.append(sock)
        if self.expired:
            self._cut()

    def _cut(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # a blocked read returns at once
            except OSError:
                pass  # not connected yet, or already closed

    def timeout(self) -> float:
        left = self.ends - time.monotonic()
        if left <= 0:
            raise ServerUnreadable(self.base_url)
        return min(self.per_request, left)

    def json(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer of a 200 to `method path`; ServerUnreadable for anything else."""
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            data=None if body is None else json.dumps(body).encode(),
            headers={"Accept": "application/json", "Content-Type": "application/json"},
            method=method,
        )
        try:
            with self._opener.open(request, timeout=self.timeout()) as response:
                if response.status != 200:
                    raise ServerUnreadable(self.base_url)
                raw = self._read(response)
            if self.expired:  # the watchdog may have cut the body short
                raise ServerUnreadable(self.base_url)
            return json.loads(raw)
        except netguard.OutboundRefused as exc:  # the name now resolves somewhere refused
            raise ProbeError(str(exc)) from None
        except urllib.error.HTTPError as exc:
            exc.close()
            if 400 <= exc.code < 600:  # a 3xx is a refused redirect: unreadable, as it always was
                raise ServerAnsweredStatus(self.base_url, exc.code) from None
            raise ServerUnreadable(self.base_url) from None
        except (OSError, http.client.HTTPException, ValueError):
            raise ServerUnreadable(self.base_url) from None

    def _read(self, response: http.client.HTTPResponse) -> bytes:
        limit = netguard.max_response_bytes()
        declared = response.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise ServerUnreadable(self.base_url)
        chunks: list[bytes] = []
        size = 0
        while chunk := response.read1(_CHUNK):
            size += len(chunk)
            if size > limit or self.expired:
                raise ServerUnreadable(self.base_url)
            chunks.append(chunk)
        return b"".join(chunks)

    def read_health(self) -> dict[str, Any]:
        if self.health is None:
            health = self.json("GET", "/health")
            if not isinstance(health, dict) or "status" not in health:
                raise ProbeError("/health did not return a status: not an environment server")
            self.health = health
        return self.health
