"""An episode's WebSocket connects only to an address the outbound rules allow, whatever the
name resolves to by then (security review N1: DNS rebinding)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from envs.adapters import adapter_class
from envs.adapters.generic import classic_adapter_class
from envs.netguard import PRIVATE_RULE, check_outbound_url
from tests.envs.servers import run_env_server

NAME = "rebind.envlab.test"
PUBLIC = "93.184.216.34"  # what the name says when the URL is checked; never connected to


@pytest.fixture(scope="module")
def echo_port() -> Iterator[int]:
    with run_env_server("envs.echo.server:app", {"ENABLE_WEB_INTERFACE": "false", "MAX_CONCURRENT_ENVS": "4"}) as url:
        yield int(url.rsplit(":", 1)[1])


@pytest.fixture
def rebinding(monkeypatch) -> list[str]:
    """`NAME` resolves to a public address once, then to 127.0.0.1 (a zero-TTL name)."""
    real = socket.getaddrinfo
    answers: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):
        if host != NAME:
            return real(host, port, *args, **kwargs)
        address = PUBLIC if not answers else "127.0.0.1"
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


def test_a_name_rebound_to_loopback_after_the_check_is_refused_at_connect(settings, rebinding, echo_port) -> None:
    settings.ENVLAB_ALLOWED_ENV_NETWORKS = []  # loopback is not for environments here
    url = check_outbound_url(f"http://{NAME}:{echo_port}")  # accepted: the name was public
    cls = adapter_class(metadata_name="EchoEnvironment", base_url=url, env_name="echo")
    adapter = cls()
    try:
        with pytest.raises(ConnectionError) as refused:
            adapter.reset(target="hello")
    finally:
        adapter._close()
    assert f"the connection to {NAME} is refused: {PRIVATE_RULE}" in str(refused.value)
    assert rebinding == [PUBLIC, "127.0.0.1"]  # resolved once at the check, once at connect


def test_an_allowed_address_still_plays(settings, echo_port) -> None:
    settings.ENVLAB_ALLOWED_ENV_NETWORKS = ["127.0.0.1/32"]
    url = f"http://127.0.0.1:{echo_port}"
    schema = {"title": "EchoAction", "type": "object", "properties": {"message": {"type": "string"}},
              "required": ["message"]}
    adapter = classic_adapter_class(base_url=url, env_name="echo", schema=schema)()
    try:
        adapter.reset(seed=1)
        assert adapter.echo(message="hi").startswith("echoed_message: hi")
    finally:
        adapter._close()
