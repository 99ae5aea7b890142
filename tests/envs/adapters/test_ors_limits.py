"""An ORS server cannot make the lab read an answer past ENVLAB_MAX_RESPONSE_BYTES (security
review K2): the openreward SDK's bodies, error bodies and event streams are capped."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from envs.adapters.ors import ors_adapter_class
from envs.adapters.ors_limits import ResponseTooLarge, _CappedStream

# One endless SSE event of short `data:` lines (the SDK keeps them all until a blank line);
# aiohttp's own line limit (512 kB) would cut one endless line before the cap did.
CHUNK = (b"data: " + b"x" * 1017 + b"\n") * 64
HUGE = 200 * 1024 * 1024  # what the server offers: far more than the lab may read


@contextmanager
def flooding_server(status: int) -> Iterator[dict]:
    """Answers every request with `status` and a 200 MB body, counting what it got to send."""
    sent = {"bytes": 0, "requests": 0}

    class Flood(http.server.BaseHTTPRequestHandler):
        def _flood(self) -> None:
            sent["requests"] += 1
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(HUGE))
            self.end_headers()
            try:
                while sent["bytes"] < HUGE:
                    self.wfile.write(CHUNK)
                    sent["bytes"] += len(CHUNK)
            except (BrokenPipeError, ConnectionResetError):
                pass

        do_GET = do_POST = _flood  # http.server's names

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flood)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sent["url"] = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield sent
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [500, 200])
def test_a_flood_of_an_answer_is_cut_at_the_cap(settings, status: int) -> None:
    settings.ENVLAB_MAX_RESPONSE_BYTES = 100_000
    with flooding_server(status) as sent:
        with pytest.raises(Exception) as refused:  # whatever the SDK wraps it in
            ors_adapter_class(base_url=sent["url"], env_name="echo")
    chain, exc = [], refused.value
    while exc is not None and len(chain) < 10:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    assert "more than 100000 bytes (ENVLAB_MAX_RESPONSE_BYTES)" in str(refused.value) or any(
        isinstance(e, ResponseTooLarge) for e in chain
    ), chain
    # The lab stopped reading: what the server got onto the wire is socket buffers, not 200 MB.
    assert sent["bytes"] < 40 * 1024 * 1024, sent
    assert sent["requests"] >= 1


def test_an_event_stream_is_counted_line_by_line() -> None:
    import aiohttp
    from aiohttp.base_protocol import BaseProtocol

    async def scenario() -> list[bytes]:
        loop = asyncio.get_running_loop()
        stream = aiohttp.StreamReader(BaseProtocol(loop), 2**16, loop=loop)
        for _ in range(100):
            stream.feed_data(b"data: " + b"y" * 1000 + b"\n")
        stream.feed_eof()
        lines = []
        with pytest.raises(ResponseTooLarge, match=r"more than 20000 bytes \(ENVLAB_MAX_RESPONSE_BYTES\)"):
            async for line in _CappedStream(stream, 20_000, "http://127.0.0.1:1"):
                lines.append(line)
        return lines

    lines = asyncio.run(scenario())
    assert len(lines) == 19  # 19 lines of 1007 bytes fit in 20,000; the 20th does not


REPRODUCTION = r"""
import os, resource, sys
import django
django.setup()
from envs.adapters.ors import ors_adapter_class
from django.conf import settings

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

try:  # warm up: the SDK's imports and loop, on a server that is not there
    ors_adapter_class(base_url="http://127.0.0.1:9", env_name="echo")
except Exception:
    pass
before = peak()
try:
    ors_adapter_class(base_url=sys.argv[1], env_name="echo")
except Exception as exc:
    print("refused:", str(exc)[:200])
print(before, peak(), settings.ENVLAB_MAX_RESPONSE_BYTES)
"""


def test_the_reviewers_reproduction_stays_under_the_cap_plus_a_margin() -> None:
    """K2's reproduction in a process of its own: a 200 MB error body to the first request.
    Its peak memory grows by at most ENVLAB_MAX_RESPONSE_BYTES and a fixed 64 MB margin (it
    grew by 1.6 GB before the cap)."""
    import os
    import subprocess
    import sys

    from tests.envs.servers import REPO_ROOT

    with flooding_server(500) as sent:
        done = subprocess.run(
            [sys.executable, "-c", REPRODUCTION, sent["url"]], cwd=REPO_ROOT, capture_output=True, text=True,
            timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test"},
        )
    assert done.returncode == 0, done.stderr[-3000:]
    refused, numbers = done.stdout.strip().splitlines()[-2:]
    assert "ENVLAB_MAX_RESPONSE_BYTES" in refused, refused
    before, after, cap = (int(n) for n in numbers.split())
    assert after - before < cap + 64 * 1024 * 1024, (before, after, cap)


def test_the_sdk_asks_the_server_itself_and_not_a_proxy_from_the_environment(monkeypatch) -> None:
    """K3: `HTTP_PROXY` would route the SDK around the outbound rules (they check the proxy)."""
    with flooding_server(404) as proxy, flooding_server(404) as server:
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy["url"])
        monkeypatch.setenv("http_proxy", proxy["url"])
        with pytest.raises(Exception):  # noqa: B017 - a 404 flood: refused either way
            ors_adapter_class(base_url=server["url"], env_name="echo")
    assert (proxy["requests"], server["requests"] >= 1) == (0, True)


def test_the_sdks_pinger_uses_the_guarded_connector() -> None:
    """K1: the keep-alive pinger's session checks every address it connects to."""
    from openreward.api._session.ping import _PingThread

    from envs.adapters.ors import _guarded_connector
    from envs.adapters.ors_limits import cap_pinger, capped_response_class

    cap_pinger(_guarded_connector)

    async def made() -> tuple:
        client = await _PingThread()._get_client()
        try:
            return type(client.connector).__name__, client._response_class, client._trust_env
        finally:
            await client.close()

    assert asyncio.run(made()) == ("GuardedConnector", capped_response_class(), False)
