"""Registering environments over the wire: kind detection, clear refusals, capacity."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.envs.servers import run_env_server
from tests.support.ports import free_port, listening_socket, url_of
from webapp.catalog.models import Environment
from webapp.catalog.probe import probe_capacity

pytestmark = pytest.mark.django_db


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers: the slow server."""
    listener = listening_socket()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield url_of(listener)
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


@pytest.fixture
def plain_http_server() -> Iterator[str]:
    """A web server that is not an environment (404 everywhere)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def unreadable(url: str) -> str:
    return (
        f"the server at {url} could not be read as an environment server "
        "(no answer, refused, timed out, redirected, too large or not JSON)"
    )


def _register(api, **body):
    started = time.monotonic()
    response = api.post("/api/environments/", {"name": "candidate", **body}, format="json")
    return response, time.monotonic() - started


@pytest.fixture
def down_server() -> str:
    """A URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


# A down, a slow (silent) and a non-environment server are all refused alike, within ten seconds.
@pytest.mark.parametrize("server", ["down_server", "silent_server", "plain_http_server"])
def test_an_unreadable_server_is_refused_quickly_and_writes_nothing(api, request, server):
    url = request.getfixturevalue(server)
    response, elapsed = _register(api, base_url=url)
    assert response.status_code == 400
    assert response.json()["base_url"] == [unreadable(url)]
    assert elapsed < 10
    assert Environment.objects.count() == 0


@pytest.fixture(scope="module")
def no_schema_url() -> Iterator[str]:
    with run_env_server("tests.catalog.no_schema_server:app") as url:
        yield url


def no_schema(answered: str = "/health and /metadata") -> str:
    return (
        f"the server answers {answered} but has no /schema (HTTP 404): envlab reads an OpenEnv server's "
        "action (the arguments its tools take) from /schema. Is it an OpenEnv server older than "
        "openenv-core 0.2.0 (update it), or not an OpenEnv server?"
    )


@pytest.mark.parametrize("kind", ["", "openenv"])
def test_a_json_server_without_schema_is_refused_for_what_it_lacks(api, no_schema_url, kind):
    response, _ = _register(api, base_url=no_schema_url, kind=kind)

    assert (response.status_code, response.json()) == (400, {"base_url": [no_schema()]})
    assert Environment.objects.count() == 0


def test_a_server_answering_only_health_is_told_so(api):
    with run_env_server("tests.catalog.no_schema_server:health_only") as url:
        response, _ = _register(api, base_url=url)

    assert (response.status_code, response.json()) == (400, {"base_url": [no_schema("/health")]})
    assert Environment.objects.count() == 0


def test_a_json_server_without_list_environments_is_no_ors_server(api, no_schema_url):
    response, _ = _register(api, base_url=no_schema_url, kind="ors")

    assert (response.status_code, response.json()) == (400, {"base_url": [
        "the server answers /health but not /list_environments (HTTP 404): an Open Reward Standard "
        "server lists its environments there, so this is not one"
    ]})
    assert Environment.objects.count() == 0


def test_harbor_and_two_sources_are_refused(api, echo_url):
    response, _ = _register(api, base_url=echo_url, kind="harbor")  # tests/catalog/test_harbor.py
    assert response.status_code == 400 and "not an OpenEnv Harbor server" in response.json()["base_url"][0]
    response, _ = _register(api, base_url=echo_url, image="ghcr.io/x/echo:1")
    assert response.status_code == 400
    assert response.json()["base_url"] == [
        "give exactly one of base_url, image (a container image) or ors_catalog (Org/Env)"
    ]
    assert Environment.objects.count() == 0


def test_container_image_without_docker_says_so(api, owner, monkeypatch, settings):
    from tests.fixtures.accounts import grant

    grant(owner, "catalog.run_container")  # past the permission and registry checks
    settings.ENVLAB_IMAGE_REGISTRIES = ["ghcr.io/example/"]
    monkeypatch.setenv("PATH", "/nonexistent")  # no docker CLI: this machine has no engine anyway
    response, _ = _register(api, image="ghcr.io/example/echo-env:latest")
    assert response.status_code == 400
    assert response.json()["image"][0].startswith("no Docker engine on this machine")
    assert Environment.objects.count() == 0


def test_ors_catalog_checks_its_name_and_key_variable(api, monkeypatch):
    monkeypatch.delenv("ENVLAB_TEST_ORS_KEY", raising=False)
    response, _ = _register(api, ors_catalog="Acme/Echo", api_key_env="ENVLAB_TEST_ORS_KEY")
    assert response.status_code == 400
    assert response.json()["api_key_env"] == [
        "api_key_env must be one of the names this installation allows: OPENREWARD_API_KEY"
    ]
    response, _ = _register(api, ors_catalog="not a name", api_key_env="lower")
    assert set(response.json()) == {"ors_catalog", "api_key_env"}
    assert Environment.objects.count() == 0


def test_openenv_detected_with_bundled_tools(api, echo_url):
    response, _ = _register(api, base_url=echo_url + "/")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["kind"], body["base_url"], body["status"], body["capacity"]) == (
        "openenv",
        echo_url,
        "healthy",
        None,
    )
    assert body["metadata"]["name"] == "echo" and body["metadata"]["style"] == "bundled"
    assert body["tools"] == [
        {
            "name": "echo",
            "description": "Echo a message back to the caller.",
            "parameters": {
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "The message to echo back."}
                },
                "required": ["message"],
            },
        }
    ]


def test_capacity_is_measured_until_capacity_reached():
    with run_env_server(
        "envs.echo.server:app", {"MAX_CONCURRENT_ENVS": "3", "ENABLE_WEB_INTERFACE": "false"}
    ) as url:
        assert (probe_capacity(url).capacity, probe_capacity(url).at_least) == (3, False)
        # The probe closed its sessions: measuring again gives the same, and so does a low limit.
        result = probe_capacity(url, limit=2)
        assert (result.capacity, result.at_least) == (2, True)


def test_register_with_measured_capacity(api):
    with run_env_server(
        "envs.echo.server:app", {"MAX_CONCURRENT_ENVS": "4", "ENABLE_WEB_INTERFACE": "false"}
    ) as url:
        response, _ = _register(api, base_url=url, measure_capacity=True)
        assert response.status_code == 201, response.json()
        assert response.json()["capacity"] == 4
        assert response.json()["metadata"]["capacity_source"] == "probed"
        env_id = response.json()["id"]
        again = api.post(f"/api/environments/{env_id}/capacity/").json()
        assert (again["capacity"], again["metadata"]["capacity_source"]) == (4, "probed")


def test_mcp_server_gets_one_tool_per_mcp_tool(api):
    with run_env_server("envs.mcpdemo.server:app", {"ENABLE_WEB_INTERFACE": "false"}) as url:
        response, _ = _register(api, base_url=url)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["kind"], body["metadata"]["name"], body["metadata"]["style"]) == ("openenv", "mcpdemo", "mcp")
    tools = {t["name"]: t["parameters"] for t in body["tools"]}
    assert set(tools) == {"add_item", "total"}
    assert {k: v["type"] for k, v in tools["add_item"]["properties"].items()} == {"name": "string", "quantity": "integer"}
    assert tools["total"]["properties"] == {}


def test_recheck_marks_a_stopped_server_unhealthy(api):
    from webapp.catalog.services import environments_recheck

    with run_env_server("envs.echo.server:app", {"ENABLE_WEB_INTERFACE": "false"}) as url:
        response, _ = _register(api, base_url=url)
        assert response.status_code == 201
        assert environments_recheck() == 1
        assert Environment.objects.get().status == "healthy"
    assert environments_recheck() == 1
    environment = Environment.objects.get()
    assert (environment.status, environment.last_error) == ("unhealthy", unreadable(url))
    assert environment.tools[0]["name"] == "echo"  # what was known is kept
