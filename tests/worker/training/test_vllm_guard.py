"""Security review N2: TRL's vLLM client talks to a run's external vLLM server only as the
outbound rules allow. Real HTTP servers on loopback stand in for the vLLM server; vLLM itself
cannot be installed here (no GPU), so `is_vllm_available` is patched to let TRL's client be
built; the client's own code (check_server, /v1/models) runs unchanged."""

from __future__ import annotations

import pytest
from trl.generation import vllm_client

from envs.netguard import OutboundRefused
from tests.catalog.outbound_servers import http_server
from worker.training.vllm_guard import guard_vllm_client, trust_vllm_origin

MODELS = b'{"data": [{"id": "tiny"}]}'


@pytest.fixture
def client_class(monkeypatch, settings):
    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda: True)  # no vLLM without a GPU
    monkeypatch.setattr(vllm_client, "requests", vllm_client.requests)  # undone after the test
    settings.ENVLAB_ALLOWED_ENV_NETWORKS = ["127.0.0.1/32"]
    guard_vllm_client()
    return vllm_client.VLLMClient


def test_a_server_the_rules_allow_is_used(client_class) -> None:
    with http_server(body=MODELS) as server:
        client = client_class(base_url=server.url)
    assert client.model == "tiny"
    assert server.hits == ["GET /health", "GET /v1/models"]


def test_a_redirect_is_refused_and_its_target_never_reached(client_class) -> None:
    with http_server(status=500, body=b"INTERNAL-ONLY-DATA token=abc123") as internal:
        with http_server(status=302, headers={"Location": f"{internal.url}/secret"}) as redirecting:
            with pytest.raises(Exception) as refused:
                client_class(base_url=redirecting.url)
    assert "redirect" in str(refused.value) or "can't be reached" in str(refused.value)
    assert internal.hits == []
    assert redirecting.hits[:1] == ["GET /health"]


def test_an_error_answers_body_never_reaches_the_runs_error(client_class) -> None:
    with http_server(status=404, body=b"INTERNAL-ONLY-DATA token=abc123") as server:
        # /health answers 404: TRL retries until its timeout; /v1/models is what raises.
        monkeypatched = client_class.check_server
        client_class.check_server = lambda self, *a, **k: None
        try:
            with pytest.raises(Exception) as failed:
                client_class(base_url=server.url)
        finally:
            client_class.check_server = monkeypatched
    assert "Request failed: 404" in str(failed.value)
    assert "INTERNAL" not in str(failed.value) and "abc123" not in str(failed.value)


def test_an_address_the_rules_refuse_is_refused_at_connect(client_class, settings) -> None:
    # What a name re-pointed after the launch check reaches: refused when connecting.
    settings.ENVLAB_ALLOWED_ENV_NETWORKS = []
    with http_server(body=MODELS) as server:
        with pytest.raises(Exception) as refused:
            client_class(base_url=server.url)
    assert isinstance(refused.value, OutboundRefused | ConnectionError) or "refused" in str(refused.value)
    assert server.hits == []


def test_the_workers_own_server_is_reached_whatever_the_rules(client_class, settings) -> None:
    settings.ENVLAB_ALLOWED_ENV_NETWORKS = []
    with http_server(body=MODELS) as server:
        trust_vllm_origin(server.url)
        client = client_class(base_url=server.url)
    assert client.model == "tiny"


def test_forwarded_for_cannot_choose_the_weight_sync_host(client_class) -> None:
    with http_server(body=MODELS, headers={"X-Forwarded-For": "10.9.9.9"}) as server:
        client = client_class(base_url=server.url)
    assert client.host == "127.0.0.1"
