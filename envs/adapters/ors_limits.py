"""No answer of an Open Reward Standard server is read past ENVLAB_MAX_RESPONSE_BYTES.

The openreward SDK reads whole bodies (`resp.text()` of an error, `resp.json()` of an
answer) and keeps every `data:` line of an SSE event, with no limit: one server answering
`create_session` with a 300 MB error body took a process from 70 MB to 1.7 GB (security
review K2), and the console builds ORS adapters inside the web process. Every aiohttp
session the SDK opens for the lab gets `CappedResponse` as its response class: a body, and
an event stream, are counted as they are read, and one that passes the cap raises
`ResponseTooLarge` (not a transport error: the SDK does not retry it) with the excess unread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from envs import netguard


class ResponseTooLarge(ValueError):
    """An ORS server's answer passed ENVLAB_MAX_RESPONSE_BYTES."""


class _CappedStream:
    """The response's StreamReader, counting what is read from it; everything else delegated."""

    def __init__(self, stream: Any, limit: int, url: str) -> None:
        self._stream = stream
        self._limit = limit
        self._url = url
        self._read = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _count(self, data: bytes) -> bytes:
        self._read += len(data)
        if self._read > self._limit:
            raise ResponseTooLarge(
                f"the ORS server at {self._url} answered more than {self._limit} bytes "
                "(ENVLAB_MAX_RESPONSE_BYTES); the rest was not read"
            )
        return data

    async def read(self, n: int = -1) -> bytes:
        if n >= 0:
            return self._count(await self._stream.read(n))
        chunks: list[bytes] = []
        while True:  # in pieces, so the cap stops the reading, not just the keeping
            chunk = await self._stream.readany()
            if not chunk:
                return b"".join(chunks)
            chunks.append(self._count(chunk))

    async def readany(self) -> bytes:
        return self._count(await self._stream.readany())

    async def readline(self) -> bytes:
        return self._count(await self._stream.readline())

    async def readchunk(self) -> tuple[bytes, bool]:
        data, end = await self._stream.readchunk()
        return self._count(data), end

    async def readexactly(self, n: int) -> bytes:
        return self._count(await self._stream.readexactly(n))

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[bytes]:
        while True:
            line = await self.readline()
            if not line:
                return
            yield line

    def iter_any(self) -> AsyncIterator[bytes]:
        return self._pieces(self.readany)

    def iter_chunked(self, n: int) -> AsyncIterator[bytes]:
        return self._pieces(lambda: self.read(n))

    async def _pieces(self, read: Any) -> AsyncIterator[bytes]:
        while True:
            piece = await read()
            if not piece:
                return
            yield piece


_response_class: type | None = None


def capped_response_class() -> type:
    """aiohttp.ClientResponse whose body and stream are capped (built once: aiohttp is
    imported only where the SDK is)."""
    global _response_class
    if _response_class is None:
        import aiohttp

        class CappedResponse(aiohttp.ClientResponse):
            async def start(self, connection: Any) -> Any:
                started = await super().start(connection)
                self.content = _CappedStream(  # type: ignore[assignment]  # a StreamReader look-alike, not a subclass
                    self.content, netguard.max_response_bytes(), f"{self.url.scheme}://{self.url.host}:{self.url.port}"
                )
                return started

        _response_class = CappedResponse
    return _response_class


def cap_session(session: Any) -> Any:
    """Give an aiohttp ClientSession the capped response class (aiohttp keeps it in
    `_response_class`, read at every request), and no proxy from the environment unless the
    operator allows them (ENVLAB_TRUST_ENV_PROXIES): through a proxy the outbound rules would
    check the proxy, not the server (security review K3)."""
    session._response_class = capped_response_class()  # noqa: SLF001 - aiohttp has no public setter on a made session
    session._trust_env = bool(netguard.setting("ENVLAB_TRUST_ENV_PROXIES", False))  # noqa: SLF001 - aiohttp has no public setter on a made session
    return session


def cap_api_sessions(api: Any) -> None:
    """Every session the SDK's environments API holds (one per base URL, made by `get`)."""
    for session in list(getattr(api, "_clients", {}).values()):
        cap_session(session)


def cap_pinger(connector: Any) -> None:
    """The SDK's keep-alive pinger opens its own session, on a plain connector, every 10 s to
    the user's host (security review K1): it gets `connector()` (the guarded one, which checks
    every address it connects to) and the caps above."""
    import aiohttp
    from openreward.api._session import ping

    thread_class = ping._PingThread  # noqa: SLF001 - openreward's pinger has no public session hook
    if getattr(thread_class, "_envlab_capped", False):
        return

    async def get_client(self: Any) -> Any:
        # The SDK's own _get_client, with the lab's connector (aiohttp 3.14; openreward 0.1.167).
        if self._client is None or self._client.closed:
            self._client = cap_session(
                aiohttp.ClientSession(connector=connector(), timeout=aiohttp.ClientTimeout(total=30))
            )
            ping.set_retry_policy(self._client, "env-server")
        return self._client

    thread_class._get_client = get_client  # noqa: SLF001 - openreward's pinger has no public session hook
    thread_class._envlab_capped = True  # noqa: SLF001 - openreward's pinger has no public session hook
