"""The worker's own fetches and what environment servers say to the model (security review
H2, M6): no redirect followed, bodies capped, addresses checked, tool text truncated."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from envs.adapters import adapter_class
from envs.adapters.base import clip_tool_text
from envs.adapters.generic import classic_adapter_class, fetch_schema
from envs.adapters.ors import _served_environments
from envs.netguard import PRIVATE_RULE
from tests.catalog.outbound_servers import http_server, raw_server
from tests.envs.servers import run_env_server

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "OPENENV_MODE": "simulation"}


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    with run_env_server("envs.echo.server:app", {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "4"}) as url:
        yield url


def test_generic_fetch_refuses_a_redirect() -> None:
    with http_server(body=b'{"action": {}}') as target:
        with http_server(status=302, headers={"Location": f"{target.url}/schema"}) as redirecting:
            with pytest.raises(ValueError) as refused:
                fetch_schema(redirecting.url)
    assert str(refused.value) == (
        f"GET {redirecting.url}/schema answered a redirect (HTTP 302), which is not followed"
    )
    assert (redirecting.hits, target.hits) == (["GET /schema"], [])


def test_generic_fetch_caps_the_body(settings) -> None:
    settings.ENVLAB_MAX_RESPONSE_BYTES = 1000
    with http_server(body=b'{"action": {"title": "' + b"x" * 5000 + b'"}}') as server:
        with pytest.raises(ValueError) as refused:
            fetch_schema(server.url)
    assert str(refused.value) == f"GET {server.url}/schema: the answer is larger than 1000 bytes"


def test_generic_fetch_checks_the_address(settings) -> None:
    settings.ENVLAB_ALLOWED_ENV_NETWORKS = []
    with http_server(body=b'{"action": {}}') as server:
        with pytest.raises(ValueError) as refused:
            fetch_schema(server.url)
    assert str(refused.value) == f"the URL is refused: {PRIVATE_RULE}"
    assert server.hits == []


def test_ors_listing_refuses_a_redirect() -> None:
    with http_server(body=b'["secret"]') as target:
        with http_server(status=302, headers={"Location": f"{target.url}/"}) as redirecting:
            assert _served_environments(redirecting.url) is None
        assert _served_environments(target.url) == ["secret"]  # the same fetch, not redirected
    assert (redirecting.hits, target.hits) == (
        ["GET /list_environments"],
        ["GET /list_environments"],
    )


def test_clip_tool_text() -> None:
    assert clip_tool_text("abcdef", limit=6) == "abcdef"
    assert clip_tool_text("abcdefgh", limit=6) == "abcdef… [truncated 2 characters]"


def test_tool_answers_are_truncated_for_the_model(echo_url: str, settings) -> None:
    settings.ENVLAB_MAX_TOOL_TEXT = 40
    bundled = adapter_class(metadata_name="echo", base_url=echo_url, env_name="echo")()
    generated = classic_adapter_class(
        base_url=echo_url, env_name="echo", schema=fetch_schema(echo_url)
    )()
    try:
        bundled.reset()
        generated.reset()
        answers = [bundled.echo(message="x" * 100), generated.echo(message="y" * 100)]
        # openenv's client would take 100 MB messages; the adapters' take the lab's cap.
        sizes = [adapter._client._async._max_message_size for adapter in (bundled, generated)]
    finally:
        bundled._close()
        generated._close()
    assert answers == [
        "x" * 40 + "… [truncated 60 characters]",
        "echoed_message: " + "y" * 24 + "… [truncated 178 characters]",  # and reward, done
    ]
    assert sizes == [settings.ENVLAB_MAX_RESPONSE_BYTES] * 2


def test_long_tool_errors_are_truncated_too(settings) -> None:
    from envs.adapters.base import EpisodeLost, OpenEnvAdapter

    settings.ENVLAB_MAX_TOOL_TEXT = 10

    class Noisy(OpenEnvAdapter):
        def shout(self) -> str:
            """Fail loudly."""
            raise EpisodeLost("z" * 50)

    with pytest.raises(EpisodeLost) as raised:
        Noisy().shout()
    assert str(raised.value) == "z" * 10 + "… [truncated 40 characters]"
    assert Noisy.shout.__doc__ == "Fail loudly." and Noisy.shout.__name__ == "shout"


def test_the_episode_socket_follows_no_redirect() -> None:
    """openenv's WebSocket client would follow a 302 from an allowed server anywhere."""
    with raw_server(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n") as target:
        location = target.url.replace("http://", "ws://") + "/ws"
        head = f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode()
        with raw_server(head) as redirecting:
            adapter = adapter_class(metadata_name="echo", base_url=redirecting.url, env_name="echo")()
            with pytest.raises(Exception):  # noqa: B017 - which one is openenv's business
                adapter.reset()
    assert redirecting.hits == ["GET /ws"]
    assert target.hits == []


def test_the_ors_sdk_cannot_be_redirected_to_a_refused_address(settings) -> None:
    """The openreward SDK follows redirects; its connector checks every hop. The refused
    target here is 127.0.0.2 (loopback, but outside the allowed 127.0.0.1/32), so nothing
    leaves the machine even if the check failed."""
    import http.server
    import threading

    from envs.adapters.ors import ors_adapter_class

    settings.ENVLAB_ALLOWED_ENV_NETWORKS = ["127.0.0.1/32"]
    hits: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"[]")

        def log_message(self, *args: object) -> None:
            pass

    target = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Recorder)
    threading.Thread(target=target.serve_forever, daemon=True).start()
    location = f"http://127.0.0.2:{target.server_address[1]}/splits"
    try:
        with http_server(status=302, headers={"Location": location}) as redirecting:
            with pytest.raises(Exception) as refused:  # the SDK's own error type
                ors_adapter_class(base_url=redirecting.url, env_name="echo")
    finally:
        target.shutdown()
        target.server_close()
    assert redirecting.hits  # the SDK did ask the allowed server
    assert hits == []  # and never reached the address it was redirected to
    # aiohttp reports the connector's refusal as a resolution failure of that host.
    assert "ClientConnectorDNSError" in str(refused.value) and "127.0.0.2" in str(refused.value)
