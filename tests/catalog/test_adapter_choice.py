"""Adapters are chosen by what a server offers, not by the name it reports (issue 7).

A bundled adapter applies only to the bundled server itself (envlab's marker on
`GET /envlab` and the `/schema` action it speaks); a third-party server that reports the
bundled echo's name gets the adapter generated from its own tools, at registration and
in the worker.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from envs.adapters import base_adapter, bind_adapter
from envs.adapters.echo import EchoAdapter
from envs.registry import ADAPTERS, bundled_match, recorded_adapter
from tests.envs.servers import run_env_server
from tests.envs.thirdparty_echo import NAME as THIRD_PARTY_NAME
from tests.envs.thirdparty_echo import TOOLS as THIRD_PARTY_TOOLS
from webapp.catalog.models import Environment

ECHO_SCHEMA = {
    "action": {
        "title": "EchoAction",
        "type": "object",
        "properties": {"metadata": {"type": "object"}, "message": {"type": "string"}},
        "required": ["message"],
    }
}
MCP_SCHEMA = {
    "action": {
        "title": "CallToolAction",
        "type": "object",
        "properties": {
            "metadata": {"type": "object"},
            "type": {"const": "call_tool", "type": "string"},
            "tool_name": {"type": "string"},
            "arguments": {"type": "object"},
        },
    }
}
ECHO_MARKER = {"envlab_bundled": "echo", "version": "0.1.0"}


@pytest.fixture(scope="module")
def third_party_url() -> Iterator[str]:
    with run_env_server("tests.envs.thirdparty_echo:app", {"ENABLE_WEB_INTERFACE": "false"}) as url:
        yield url


def trl_tool_names(adapter_cls: type[Any]) -> list[str]:
    """The tools GRPOTrainer takes from an environment class (trl 1.16's own rule)."""
    return [
        name
        for name, _ in inspect.getmembers(adapter_cls, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


# --- the rule ---------------------------------------------------------------------------------


def test_bundled_needs_the_marker_and_the_action() -> None:
    assert bundled_match(ECHO_MARKER, ECHO_SCHEMA) is ADAPTERS["echo"]
    assert bundled_match(None, ECHO_SCHEMA) is None  # a classic echo of someone else's
    assert bundled_match({"name": "echo"}, ECHO_SCHEMA) is None
    assert bundled_match(ECHO_MARKER, MCP_SCHEMA) is None  # a marker does not make it one
    assert bundled_match({"envlab_bundled": "wordle"}, ECHO_SCHEMA) is None
    assert bundled_match({"envlab_bundled": "nosuch"}, ECHO_SCHEMA) is None
    assert bundled_match(["echo"], ECHO_SCHEMA) is None
    assert bundled_match(ECHO_MARKER, {"action": "EchoAction"}) is None
    extra = {"action": {**ECHO_SCHEMA["action"], "properties": {"message": {}, "loud": {}}}}
    assert bundled_match(ECHO_MARKER, extra) is None


def test_recorded_adapter_reads_the_stored_decision_only() -> None:
    assert recorded_adapter({"style": "bundled", "adapter": "echo"}) is ADAPTERS["echo"]
    assert recorded_adapter({"name": "echo"}) is None
    assert recorded_adapter({"name": "echo", "style": "bundled"}) is None  # decided by name once
    assert recorded_adapter({"style": "mcp", "adapter": "echo"}) is None
    assert recorded_adapter({"style": "bundled", "adapter": "nosuch"}) is None
    assert recorded_adapter(None) is None


# --- registration and the worker --------------------------------------------------------------


@pytest.mark.django_db
def test_third_party_echo_registers_with_its_own_tools_and_trains_with_them(api, third_party_url):
    response = api.post(
        "/api/environments/", {"name": "their-echo", "base_url": third_party_url}, format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["kind"], body["metadata"]["name"], body["metadata"]["style"]) == (
        "openenv", THIRD_PARTY_NAME, "mcp",
    )
    assert "adapter" not in body["metadata"]
    assert [tool["name"] for tool in body["tools"]] == list(THIRD_PARTY_TOOLS)
    assert body["tools"][0]["parameters"]["properties"]["message"]["type"] == "string"

    # What the worker builds for a run against it: the server's own tools, and they work.
    environment = Environment.objects.get(pk=body["id"])
    adapter_cls = bind_adapter(environment=environment, env_name="their-echo", batch_size=2)
    assert not issubclass(adapter_cls, EchoAdapter)
    assert trl_tool_names(adapter_cls) == list(THIRD_PARTY_TOOLS)
    adapter = adapter_cls()
    try:
        adapter.reset(seed=1)
        assert adapter.echo_message(message="hello") == "hello"
        assert "5" in adapter.echo_with_length(message="hello")
        assert (adapter.tool_calls, adapter.tool_failures, adapter.lost) == (2, 0, False)
    finally:
        adapter._close()


@pytest.mark.django_db
def test_bundled_echo_stores_its_adapter(api, echo_url):
    # Under a name of the user's ('echo' is reserved): the server's marker decides, not the name.
    response = api.post("/api/environments/", {"name": "my-echo", "base_url": echo_url}, format="json")
    assert response.status_code == 201, response.json()
    metadata = response.json()["metadata"]
    assert (metadata["name"], metadata["style"], metadata["adapter"]) == ("echo", "bundled", "echo")
    assert [tool["name"] for tool in response.json()["tools"]] == ["echo"]
    environment = Environment.objects.get(pk=response.json()["id"])
    assert base_adapter(environment) is EchoAdapter


def _row(base_url: str, metadata: dict[str, Any]) -> SimpleNamespace:
    return SimpleNamespace(kind="openenv", name="old-row", base_url=base_url, metadata=metadata)


@pytest.mark.parametrize(
    "metadata",
    [{"name": THIRD_PARTY_NAME}, {"name": "echo"}, {"name": "echo", "style": "bundled"}],
)
def test_rows_without_a_stored_decision_ask_the_server(third_party_url, metadata):
    """Rows registered before the decision was stored: the name decides nothing."""
    adapter_cls = base_adapter(_row(third_party_url, metadata))
    assert trl_tool_names(adapter_cls) == list(THIRD_PARTY_TOOLS)


def test_old_rows_of_the_bundled_echo_keep_its_adapter(echo_url):
    assert base_adapter(_row(echo_url, {"name": "echo"})) is EchoAdapter
    assert base_adapter(_row(echo_url, {"name": "echo", "style": "bundled"})) is EchoAdapter


@pytest.mark.parametrize("key", ["wordle", "catch", "sudoku"])
def test_every_bundled_server_is_recognised_as_itself(key):
    """The marker each bundled server publishes and its action match its adapter's entry."""
    from webapp.catalog.kinds import probe_environment

    with run_env_server(f"envs.{key}.server:app", {"ENABLE_WEB_INTERFACE": "false"}) as url:
        result = probe_environment(url)
    assert (result.metadata["style"], result.metadata["adapter"]) == ("bundled", key)
    assert [tool["name"] for tool in result.tools] == list(ADAPTERS[key].tool_names)
