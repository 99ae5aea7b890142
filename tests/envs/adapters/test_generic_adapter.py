"""Generic OpenEnv adapters generated from what real servers describe (echo: classic,
mcpdemo: MCP), as TRL's environment_factory sees them."""

from __future__ import annotations

import http.server
import inspect
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation, State
from transformers.utils import get_json_schema

from envs.adapters.base import EpisodeLost, OpenEnvAdapter
from envs.adapters.generic import (
    classic_adapter_class,
    detect_openenv_style,
    fetch_schema,
    list_mcp_tools,
    mcp_adapter_class,
)
from tests.envs.servers import run_env_server, serve_in_thread
from tests.support.ports import free_port, listening_socket, url_of
from tests.support.processes import modules_imported

ECHO_APP = "envs.echo.server:app"
MCPDEMO_APP = "envs.mcpdemo.server:app"
SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "OPENENV_MODE": "simulation"}
ECHO_INSTRUCTION = (
    "instruction: Repeat exactly: hello\n"
    "You have 4 tries; an exact repeat scores 1.0 and ends the episode."
)
MCPDEMO_SEED_3 = (
    "\ninstruction: Build a shopping list whose quantities add up to exactly 5: add items "
    "with add_item(name, quantity), then call total() to check. You have 8 tool calls; a "
    "matching total() scores 1.0 and ends the episode."
)
RETURNS_OBSERVATION = {
    "type": "string",
    "description": "The observation as text, with the reward and whether the episode is done.",
}
RETURNS_TOOL_RESULT = {"type": "string", "description": "The tool's result as text."}


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    with run_env_server(ECHO_APP, {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "4"}) as url:
        yield url


@pytest.fixture(scope="module")
def mcpdemo_url() -> Iterator[str]:
    with run_env_server(MCPDEMO_APP, {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "4"}) as url:
        yield url



def trl_tools(adapter: Any) -> dict[str, Callable[..., Any]]:
    """The tools GRPOTrainer takes from an environment instance (trl 1.16's own rule)."""
    methods = [
        getattr(adapter, name)
        for name, _ in inspect.getmembers(type(adapter), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]
    return {method.__name__: method for method in methods}


# --- registration-time probes ---------------------------------------------------------


def test_detect_style_of_both_servers(echo_url: str, mcpdemo_url: str) -> None:
    assert detect_openenv_style(echo_url) == "classic"
    assert detect_openenv_style(mcpdemo_url + "/") == "mcp"
    assert detect_openenv_style(mcpdemo_url.replace("http://", "ws://"), timeout=2) == "mcp"


def test_list_mcp_tools(mcpdemo_url: str, echo_url: str) -> None:
    tools = list_mcp_tools(mcpdemo_url)
    assert [tool["name"] for tool in tools] == ["add_item", "total"]
    assert tools[1] == {
        "name": "total",
        "description": "The total quantity on the shopping list, checked against the target if any.",
        "inputSchema": {"additionalProperties": False, "properties": {}, "type": "object"},
    }
    with pytest.raises(ValueError) as excinfo:
        list_mcp_tools(echo_url)
    assert str(excinfo.value) == (
        f"POST {echo_url}/mcp refused tools/list: Environment does not support MCP"
    )


@contextmanager
def plain_http_server(directory: Path) -> Iterator[str]:
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_probes_reject_a_server_that_is_not_openenv(tmp_path: Path) -> None:
    (tmp_path / "health").write_text("ok")
    with plain_http_server(tmp_path) as url:
        with pytest.raises(ValueError) as detect_error:
            detect_openenv_style(url)
        with pytest.raises(ValueError) as tools_error:
            list_mcp_tools(url)
    assert str(detect_error.value) == (
        f"GET {url}/schema answered HTTP 404; is this an OpenEnv environment server?"
    )
    assert str(tools_error.value) == (
        f"POST {url}/mcp answered HTTP 501; is this an OpenEnv environment server?"
    )


def test_probes_reject_json_that_is_not_a_schema(tmp_path: Path) -> None:
    (tmp_path / "schema").write_text('{"openapi": "3.1.0"}')
    with plain_http_server(tmp_path) as url:
        with pytest.raises(ValueError) as excinfo:
            fetch_schema(url)
    assert str(excinfo.value) == (
        f"GET {url}/schema is not an OpenEnv schema: expected an object with an 'action' "
        "JSON schema. Is this an OpenEnv environment server?"
    )


def test_probes_report_unreachable_and_bad_urls() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError) as excinfo:
        detect_openenv_style(url, timeout=2)
    assert str(excinfo.value).startswith(f"cannot reach {url}/schema: ")
    with pytest.raises(ValueError) as bad_url:
        detect_openenv_style("localhost:8000")
    assert str(bad_url.value) == (
        "base_url must be an http(s) URL like http://127.0.0.1:8000, got 'localhost:8000'"
    )


def test_probes_time_out_on_a_silent_server() -> None:
    with listening_socket() as silent:  # accepts connections (in the backlog) and never answers
        url = url_of(silent)
        started = time.monotonic()
        with pytest.raises(ConnectionError) as excinfo:
            detect_openenv_style(url, timeout=0.5)
    assert str(excinfo.value) == f"cannot reach {url}/schema: timed out"
    assert time.monotonic() - started < 3


def test_probes_import_no_openenv_or_torch() -> None:
    run = modules_imported(
        "envs.adapters.generic",
        {"openenv", "fastapi", "fastmcp", "torch", "transformers", "trl"},
        timeout=60,
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "[]\n", "")


# --- classic: the echo server ---------------------------------------------------------


def test_classic_tool_from_echo_schema(echo_url: str, opened: Callable[..., Any]) -> None:
    cls = classic_adapter_class(base_url=echo_url, env_name="echo", schema=fetch_schema(echo_url))
    assert issubclass(cls, OpenEnvAdapter)
    assert (cls.__name__, cls.base_url, cls.env_name) == ("EchoClassicAdapter", echo_url, "echo")
    tools = trl_tools(opened(cls))
    assert list(tools) == ["echo"]
    assert str(inspect.signature(tools["echo"])) == "(*, message: str) -> str"
    assert cls.echo.__qualname__ == "EchoClassicAdapter.echo"
    assert get_json_schema(tools["echo"]) == {
        "type": "function",
        "function": {
            "name": "echo",
            "description": "Say something; the environment echoes it back.",
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string", "description": "Text to echo back"}},
                "required": ["message"],
            },
            "return": RETURNS_OBSERVATION,
        },
    }


def test_classic_adapter_plays_an_episode(echo_url: str, opened: Callable[..., Any]) -> None:
    cls = classic_adapter_class(
        base_url=echo_url,
        env_name="echo",
        schema=fetch_schema(echo_url)["action"],
        description="Repeat the phrase.",
        reset_keys=("seed", "target"),
    )
    assert cls.echo.__doc__.splitlines()[0] == (
        "Say something; the environment echoes it back. Repeat the phrase."
    )
    adapter = opened(cls)
    row = {"prompt": [{"role": "user", "content": "Go"}], "seed": 0, "target": "hello"}
    assert adapter.reset(**row) == f'\nechoed_message: ""\n{ECHO_INSTRUCTION}'

    assert adapter.echo(message="help") == (
        f"echoed_message: help\n{ECHO_INSTRUCTION}\nreward: 0.3333333333333333\ndone: false"
    )
    assert adapter.echo(message="hello") == (
        f"echoed_message: hello\n{ECHO_INSTRUCTION}\nreward: 1.0\ndone: true"
    )
    # A generated adapter's episode reward is the sum of the step rewards (1/3 + 1): the
    # bundled echo adapter, which knows each step scores afresh, keeps the best instead.
    assert (adapter.reward, adapter.done, adapter.lost) == (1 / 3 + 1.0, True, False)
    assert (adapter.tool_calls, adapter.tool_failures) == (2, 0)
    with pytest.raises(RuntimeError, match=r"^Game over\.$"):
        adapter.echo(message="hello")

    # A new episode on the same instance, as TRL's pool reuses it.
    assert adapter.reset(**row) == f'\nechoed_message: ""\n{ECHO_INSTRUCTION}'
    assert (adapter.reward, adapter.done, adapter.tool_calls) == (0.0, False, 0)


def test_classic_reset_sends_only_the_seed_by_default(
    echo_url: str, opened: Callable[..., Any]
) -> None:
    cls = classic_adapter_class(base_url=echo_url, env_name="echo", schema=fetch_schema(echo_url))
    adapter = opened(cls)
    # The row's target is not sent: the echo server starts an untargeted episode.
    assert adapter.reset(prompt="Go", seed=1, target="hello") == (
        '\nechoed_message: ""\ninstruction: Say anything; it is echoed back. '
        "The episode ends after 4 steps."
    )
    assert adapter.echo(message="hi").endswith("\nreward: 0.0\ndone: false")


def test_classic_bad_arguments_fail_before_the_server(
    echo_url: str, opened: Callable[..., Any]
) -> None:
    cls = classic_adapter_class(base_url=echo_url, env_name="echo", schema=fetch_schema(echo_url))
    adapter = opened(cls)
    adapter.reset(seed=1)
    with pytest.raises(TypeError) as missing:
        adapter.echo(text="hi")
    assert str(missing.value) == "echo: missing a required argument: 'message'"
    with pytest.raises(TypeError) as unexpected:
        adapter.echo(message="hi", text="hi")
    assert str(unexpected.value) == "echo: got an unexpected keyword argument 'text'"
    with pytest.raises(RuntimeError, match=r"\(code: VALIDATION_ERROR\)$"):
        adapter.echo(message="y" * 2001)  # the server's own limit, reported by the server
    assert (adapter.tool_calls, adapter.tool_failures) == (3, 3)
    assert adapter.echo(message="still here").startswith("echoed_message: still here\n")


# --- MCP: the mcpdemo server ----------------------------------------------------------


def test_mcp_tools_from_mcpdemo(mcpdemo_url: str, opened: Callable[..., Any]) -> None:
    cls = mcp_adapter_class(
        base_url=mcpdemo_url, env_name="mcpdemo", tools=list_mcp_tools(mcpdemo_url)
    )
    assert issubclass(cls, OpenEnvAdapter)
    assert cls.__name__ == "McpdemoMcpAdapter"
    tools = trl_tools(opened(cls))
    assert list(tools) == ["add_item", "total"]
    assert str(inspect.signature(tools["add_item"])) == "(*, name: str, quantity: int) -> str"
    assert get_json_schema(tools["add_item"]) == {
        "type": "function",
        "function": {
            "name": "add_item",
            "description": "Add some of an item to the shopping list; quantities of one name add up.",
            "parameters": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Item to add, e.g. 'apple'"},
                    "quantity": {"type": "integer", "description": "How many to add (1-100)"},
                },
                "required": ["name", "quantity"],
            },
            "return": RETURNS_TOOL_RESULT,
        },
    }
    assert get_json_schema(tools["total"]) == {
        "type": "function",
        "function": {
            "name": "total",
            "description": "The total quantity on the shopping list, checked against the target if any.",
            "parameters": {"type": "object", "properties": {}},
            "return": RETURNS_TOOL_RESULT,
        },
    }


def test_mcp_state_persists_within_an_episode(mcpdemo_url: str, opened: Callable[..., Any]) -> None:
    cls = mcp_adapter_class(
        base_url=mcpdemo_url, env_name="mcpdemo", tools=list_mcp_tools(mcpdemo_url)
    )
    adapter = opened(cls)
    assert adapter.reset(prompt="Go", seed=3, target="ignored") == MCPDEMO_SEED_3
    assert adapter.add_item(name="apple", quantity=2) == "apple: 2. Total quantity: 2."
    assert adapter.add_item(name="pear", quantity=3) == "pear: 3. Total quantity: 5."
    assert adapter.total() == "5\nreward: 1.0\ndone: true"
    assert (adapter.reward, adapter.done, adapter.tool_calls, adapter.tool_failures) == (
        1.0,
        True,
        3,
        0,
    )
    with pytest.raises(RuntimeError, match=r"^Game over\.$"):
        adapter.total()

    # A fresh reset starts over: a new session, an empty list, a new target.
    assert "add up to exactly 8:" in adapter.reset(seed=0)
    assert adapter.total() == "0"
    assert (adapter.reward, adapter.done, adapter.tool_calls) == (0.0, False, 1)


def test_mcp_tool_errors_are_raised_and_counted(
    mcpdemo_url: str, opened: Callable[..., Any]
) -> None:
    cls = mcp_adapter_class(
        base_url=mcpdemo_url, env_name="mcpdemo", tools=list_mcp_tools(mcpdemo_url)
    )
    adapter = opened(cls)
    adapter.reset()
    with pytest.raises(RuntimeError) as server_error:
        adapter.add_item(name="x", quantity=0)
    assert str(server_error.value).startswith(
        "1 validation error for call[add_item]\nquantity\n"
        "  Input should be greater than or equal to 1 "
    )
    with pytest.raises(TypeError) as argument_error:
        adapter.add_item(quantity=1)
    assert str(argument_error.value) == "add_item: missing a required argument: 'name'"
    assert (adapter.tool_calls, adapter.tool_failures, adapter.lost) == (2, 2, False)
    assert adapter.add_item(name="x", quantity=1) == "x: 1. Total quantity: 1."


def test_mcp_episode_lost_when_the_server_restarts(opened: Callable[..., Any]) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with run_env_server(MCPDEMO_APP, SERVER_ENV, port=port):
        cls = mcp_adapter_class(base_url=url, env_name="mcpdemo", tools=list_mcp_tools(url))
        adapter = opened(cls)
        adapter.reset(seed=3)
        adapter.add_item(name="apple", quantity=2)
    with run_env_server(MCPDEMO_APP, SERVER_ENV, port=port):
        # The client reconnects silently to a fresh environment; its answer names no episode.
        with pytest.raises(EpisodeLost):
            adapter.add_item(name="pear", quantity=3)
        assert (adapter.lost, adapter.tool_calls, adapter.tool_failures) == (True, 2, 1)
        with pytest.raises(EpisodeLost):
            adapter.total()
        assert adapter.reset(seed=3) == MCPDEMO_SEED_3
        assert (adapter.lost, adapter.total()) == (False, "0")


# --- an MCP server that reports no episode in its observations ------------------------


class BareCounterEnvironment(MCPEnvironment):
    """Like OpenEnv's reference MCP environments: tool-call observations carry no metadata."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()
        self._count = 0
        mcp = FastMCP("bare")

        @mcp.tool
        async def bump(by: int = 1) -> int:
            """Add to the counter and return it."""
            self._count += by
            return self._count

        super().__init__(mcp)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()))
        self._count = 0
        return Observation()

    def _step_impl(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        raise ValueError("tools only")

    @property
    def state(self) -> State:
        return self._state


@contextmanager
def serve_bare_counter(port: int, action_cls: type[Action] = CallToolAction) -> Iterator[str]:
    """The bare environment on a uvicorn server in a thread of this process."""
    app = create_app(BareCounterEnvironment, action_cls, CallToolObservation, max_concurrent_envs=2)
    with serve_in_thread(app, port, "bare") as url:
        yield url


def test_lost_episode_found_through_state_when_observations_say_nothing(
    opened: Callable[..., Any],
) -> None:
    port = free_port()
    with serve_bare_counter(port) as url:
        assert detect_openenv_style(url) == "mcp"
        cls = mcp_adapter_class(base_url=url, env_name="bare", tools=list_mcp_tools(url))
        adapter = opened(cls)
        assert list(trl_tools(adapter)) == ["bump"]
        assert str(inspect.signature(adapter.bump)) == "(*, by: int = 1) -> str"
        assert adapter.reset(seed=1) is None  # nothing to show
        assert adapter.bump() == "1"
        assert adapter.bump(by=4) == "5"
    with serve_bare_counter(port):
        with pytest.raises(EpisodeLost):
            adapter.bump()
        assert (adapter.lost, adapter.tool_calls, adapter.tool_failures) == (True, 3, 1)


# --- schemas to signatures, without a server ------------------------------------------

NOWHERE = "http://127.0.0.1:9"  # building a class opens no connection

MOVE_ACTION = {
    "title": "MoveAction",
    "description": "Move a piece.\n\nArgs: see below",
    "type": "object",
    "$defs": {"Color": {"enum": ["red", "blue"], "title": "Color", "type": "string"}},
    "properties": {
        "metadata": {"type": "object"},
        "kind": {"const": "move", "default": "move", "type": "string"},
        "direction": {"enum": ["left", "right"], "type": "string", "description": "Where to"},
        "steps": {"type": "integer", "default": 1, "description": "How far"},
        "color": {"$ref": "#/$defs/Color"},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels"},
        "weights": {
            "anyOf": [{"type": "array", "items": {"type": "number"}}, {"type": "null"}],
            "default": None,
            "description": "Optional\n  weights",
        },
        "note-text": {"type": ["string", "null"], "description": "A note (choices: x)"},
        "extra": {"type": "object", "description": "Anything"},
        "flag": {"type": "boolean", "description": "A flag"},
    },
    "required": ["direction", "color"],
}


def test_action_schema_types_become_typed_parameters() -> None:
    cls = classic_adapter_class(base_url=NOWHERE + "/", env_name="chess-lite", schema=MOVE_ACTION)
    assert (cls.__name__, cls.base_url) == ("ChessLiteClassicAdapter", NOWHERE)
    tools = trl_tools(cls())
    assert list(tools) == ["move"]
    assert str(inspect.signature(tools["move"])) == (
        "(*, direction: Literal['left', 'right'], steps: int = 1, "
        "color: Literal['red', 'blue'], tags: Optional[list[str]] = None, "
        "weights: Optional[list[float]] = None, note_text: Optional[str] = None, "
        "extra: Optional[dict[str, Any]] = None, flag: Optional[bool] = None) -> str"
    )
    nullable = {"nullable": True}
    assert get_json_schema(tools["move"]) == {
        "type": "function",
        "function": {
            "name": "move",
            "description": "Move a piece. Args - see below",
            "parameters": {
                "type": "object",
                "properties": {
                    "direction": {
                        "type": "string",
                        "enum": ["left", "right"],
                        "description": "Where to",
                    },
                    "steps": {"type": "integer", "description": "How far"},
                    "color": {"type": "string", "enum": ["red", "blue"], "description": "Color"},
                    "tags": {
                        "type": "array",
                        "items": {"type": "string"},
                        **nullable,
                        "description": "Labels",
                    },
                    "weights": {
                        "type": "array",
                        "items": {"type": "number"},
                        **nullable,
                        "description": "Optional weights",
                    },
                    "note_text": {
                        "type": "string",
                        **nullable,
                        "description": "A note (choices - x)",
                    },
                    "extra": {
                        "type": "object",
                        "additionalProperties": {},
                        **nullable,
                        "description": "Anything",
                    },
                    "flag": {"type": "boolean", **nullable, "description": "A flag"},
                },
                "required": ["direction", "color"],
            },
            "return": RETURNS_OBSERVATION,
        },
    }


def test_tool_names_are_made_public_identifiers() -> None:
    tools = [
        {"name": "get-weather", "description": "Weather by city.", "inputSchema": {}},
        {"name": "get_weather", "description": "Weather again."},
        {"name": "done"},
        {"name": "reset"},
        {"name": "class"},
        {"name": "_hidden"},
        {"name": "9lives", "input_schema": {"properties": {"for": {"type": "integer"}}}},
    ]
    cls = mcp_adapter_class(base_url=NOWHERE, env_name="odd names", tools=tools)
    assert cls.__name__ == "OddNamesMcpAdapter"
    found = trl_tools(cls())
    assert sorted(found) == [
        "class_",
        "done_tool",
        "get_weather",
        "get_weather_2",
        "hidden",
        "reset_tool",
        "tool_9lives",
    ]
    assert found["get_weather"].__doc__.splitlines()[0] == "Weather again."
    assert found["get_weather_2"].__doc__.splitlines()[0] == "Weather by city."
    assert found["done_tool"].__doc__.splitlines()[0] == "Call the done tool."
    assert str(inspect.signature(found["tool_9lives"])) == "(*, for_: Optional[int] = None) -> str"
    assert all(getattr(cls, name).__qualname__ == f"OddNamesMcpAdapter.{name}" for name in found)


def test_classic_tool_name_falls_back_to_env_step() -> None:
    schema = {"title": "ResetAction", "properties": {"value": {"type": "integer"}}}
    cls = classic_adapter_class(base_url=NOWHERE, env_name="Grid World", schema=schema)
    assert list(trl_tools(cls())) == ["grid_world_step"]
    assert cls.grid_world_step.__doc__ == (
        "Act in the Grid World environment.\n\nArgs:\n    value: value\n\n"
        "Returns:\n    The observation as text, with the reward and whether the episode is done."
    )


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"title": "CallToolAction", "properties": {"tool_name": {"type": "string"}}},
            "this is an MCP-style environment (CallToolAction): use mcp_adapter_class",
        ),
        (
            {"title": "Action", "properties": {"metadata": {"type": "object"}}},
            "the action schema has no fields besides metadata: nothing to call",
        ),
        (
            {"action": {"properties": ["message"]}},
            "schema must be an OpenEnv action JSON schema with 'properties'",
        ),
    ],
)
def test_classic_adapter_class_rejects(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        classic_adapter_class(base_url=NOWHERE, env_name="x", schema=schema)
    assert str(excinfo.value) == message


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([], "an MCP adapter needs at least one tool"),
        ([{"name": " "}], "every MCP tool needs a name, got {'name': ' '}"),
        ([{"name": "a", "inputSchema": []}], "MCP tool 'a' has a malformed inputSchema"),
    ],
)
def test_mcp_adapter_class_rejects(tools: list[Any], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        mcp_adapter_class(base_url=NOWHERE, env_name="x", tools=tools)
    assert str(excinfo.value) == message


def test_bad_base_url_and_reset_keys_are_rejected() -> None:
    schema = {"properties": {"value": {"type": "integer"}}}
    with pytest.raises(ValueError, match=r"^base_url must be an http\(s\) URL"):
        classic_adapter_class(base_url="ftp://host", env_name="x", schema=schema)
    with pytest.raises(ValueError, match=r"^reset_keys must be a sequence of dataset-row keys$"):
        classic_adapter_class(base_url=NOWHERE, env_name="x", schema=schema, reset_keys="seed")


def test_mcp_server_with_a_plain_action_schema_is_found_through_mcp() -> None:
    # Some MCP environments declare the base Action: /schema shows only metadata, and
    # openenv still routes call_tool steps to the tools.
    with serve_bare_counter(free_port(), action_cls=Action) as url:
        assert list(fetch_schema(url)["action"]["properties"]) == ["metadata"]
        assert detect_openenv_style(url) == "mcp"
        cls = mcp_adapter_class(base_url=url, env_name="bare", tools=list_mcp_tools(url))
        adapter = cls()
        try:
            adapter.reset()
            assert [adapter.bump(by=2), adapter.bump()] == ["2", "3"]
        finally:
            adapter._close()
