"""Per-tool metrics counted where the calls happen: scripted episodes against the real echo,
broken-echo and mcpdemo servers (uvicorn), each failure in its error class."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation, State

from envs.adapters import adapter_class, loop, toolstats
from envs.adapters.base import EpisodeLost
from envs.adapters.generic import list_mcp_tools, mcp_adapter_class
from envs.adapters.router import router_class
from envs.adapters.tool_metrics import ERROR_CLASSES
from tests.envs.servers import free_port, run_env_server, serve_in_thread

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "OPENENV_MODE": "simulation"}
NO_ERRORS = {f"tools/errors/{name}": 0.0 for name in ERROR_CLASSES}


@pytest.fixture(scope="module")
def mcpdemo_url() -> Iterator[str]:
    with run_env_server("envs.mcpdemo.server:app", SERVER_ENV) as url:
        yield url


@pytest.fixture
def collect() -> Iterator[Any]:
    """The process's collector, started as the runner starts it for a run."""

    def start(*names: str) -> toolstats.ToolStats:
        toolstats.COLLECTOR.start(tool_names=names)
        return toolstats.COLLECTOR

    yield start
    toolstats.COLLECTOR.stop()


def latencies(values: dict[str, float]) -> dict[str, float]:
    """Pops the latency keys (timings vary) and returns them."""
    return {key: values.pop(key) for key in [k for k in values if k.endswith("/latency_s")]}


def errors(**counts: float) -> dict[str, float]:
    return {**NO_ERRORS, **{f"tools/errors/{name}": float(n) for name, n in counts.items()}}


def one_tool(tool: str, *, calls: float, failures: float, **error_counts: float) -> dict[str, float]:
    """What an episode that called only `tool` leaves: its call and failure totals, and the
    error classes counted (the others at 0)."""
    return {
        f"tools/{tool}/call_total": calls,
        f"tools/{tool}/failure_total": failures,
        **errors(**error_counts),
    }


def test_scripted_echo_episode_counts_calls_failures_and_classes(echo_url, collect):
    collector = collect("echo")
    adapter = adapter_class(metadata_name="echo", base_url=echo_url, env_name="echo")()
    adapter.reset()
    assert adapter.echo(message="one") == "one"
    with pytest.raises(TypeError):
        adapter.echo(msg="a name the tool does not take")
    with pytest.raises(ValueError):  # the action model refuses it before the server sees it
        adapter.echo(message="x" * 2001)
    for word in ("two", "three", "four"):
        adapter.echo(message=word)
    with pytest.raises(RuntimeError, match=r"^Game over\.$"):  # the episode ended at 4 steps
        adapter.echo(message="five")
    adapter._close()

    values = collector.drain()

    timed = latencies(values)
    assert values == one_tool("echo", calls=7.0, failures=3.0, invalid_args=2, execution_error=1)
    assert list(timed) == ["tools/echo/latency_s"]
    assert 0 < timed["tools/echo/latency_s"] < 5
    # Drained: the next step starts from zero, the tool still listed.
    assert collector.drain() == {
        "tools/echo/call_total": 0.0,
        "tools/echo/failure_total": 0.0,
        **NO_ERRORS,
    }


def test_a_server_error_frame_is_an_execution_error_and_a_dead_server_a_transport_error(collect):
    collector = collect("echo")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with run_env_server("tests.support.broken_echo:app", SERVER_ENV, port=port):
        adapter = adapter_class(metadata_name="echo", base_url=url, env_name="echo")()
        adapter.reset()
        with pytest.raises(RuntimeError, match=r"\(code: EXECUTION_ERROR\)$"):
            adapter.echo(message="hi")
    with pytest.raises(EpisodeLost):  # the server is gone: the episode with it
        adapter.echo(message="hi")
    adapter._close()

    values = collector.drain()

    del values["tools/echo/latency_s"]
    assert values == one_tool("echo", calls=2.0, failures=2.0, execution_error=1, transport_error=1)


def test_scripted_mcpdemo_episode_takes_the_servers_error_types(mcpdemo_url, collect):
    tools = list_mcp_tools(mcpdemo_url)
    # A tool the adapter offers and the server does not have: the server answers tool_not_found.
    ghost = {"name": "remove_item", "description": "Remove an item.", "inputSchema": {"properties": {}}}
    adapter = mcp_adapter_class(base_url=mcpdemo_url, env_name="mcpdemo", tools=[*tools, ghost])()
    collector = collect("add_item", "total", "remove_item")
    adapter.reset(seed=3)
    assert adapter.add_item(name="apple", quantity=2) == "apple: 2. Total quantity: 2."
    with pytest.raises(RuntimeError, match=r"^1 validation error for call\[add_item\]"):
        adapter.add_item(name="pear", quantity=0)  # the server classes its own refusal
    with pytest.raises(TypeError, match=r"^add_item: missing a required argument: 'name'$"):
        adapter.add_item(quantity=1)
    with pytest.raises(RuntimeError, match="remove_item"):
        adapter.remove_item()
    assert adapter.total() == "2"
    adapter._close()

    values = collector.drain()

    assert set(latencies(values)) == {
        "tools/add_item/latency_s", "tools/total/latency_s", "tools/remove_item/latency_s",
    }
    assert values == {
        "tools/add_item/call_total": 3.0,
        "tools/add_item/failure_total": 2.0,
        "tools/total/call_total": 1.0,
        "tools/total/failure_total": 0.0,
        "tools/remove_item/call_total": 1.0,
        "tools/remove_item/failure_total": 1.0,
        **errors(execution_error=1, invalid_args=1, tool_not_found=1),
    }


# --- a server that never answers in time ----------------------------------------------


class SlowEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()
        mcp = FastMCP("slow")

        @mcp.tool
        async def wait() -> str:
            """Answer after two seconds."""
            await asyncio.sleep(2)
            return "done"

        super().__init__(mcp)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id or "slow-episode")
        return Observation(metadata={"episode_id": self._state.episode_id, "step_count": 0})

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        raise ValueError("tools only")

    @property
    def state(self) -> State:
        return self._state


@contextmanager
def serve_slow() -> Iterator[str]:
    """The slow environment on a uvicorn server in a thread of this process."""
    app = create_app(SlowEnvironment, CallToolAction, CallToolObservation, max_concurrent_envs=2)
    with serve_in_thread(app, free_port(), "slow") as url:
        yield url


def test_a_call_past_the_clients_timeout_is_a_timeout(collect, monkeypatch):
    # The lab's own limit (ENVLAB_ENV_CALL_TIMEOUT, 120 s) made short: the server is real and slow.
    monkeypatch.setattr(loop.run, "__defaults__", (0.5,))
    with serve_slow() as url:
        adapter = mcp_adapter_class(base_url=url, env_name="slow", tools=list_mcp_tools(url))()
        collector = collect("wait")
        adapter.reset()
        with pytest.raises((TimeoutError, EpisodeLost)):
            adapter.wait()
        adapter._close()

    values = collector.drain()

    assert 0.4 < values.pop("tools/wait/latency_s") < 15
    assert values == one_tool("wait", calls=1.0, failures=1.0, timeout=1)


# --- calls no adapter sees ------------------------------------------------------------


def tool_message(name: str, content: str) -> dict[str, str]:
    return {"role": "tool", "name": name, "content": content}


def test_unknown_tools_are_counted_from_the_transcripts_once(collect):
    collector = collect("echo")
    rows = [
        {"messages": [
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "search"}}]},
            tool_message("search", str({"error": "Tool search not found."})),
            # The adapter counted this failure itself: not counted again.
            tool_message("echo", str({"error": "echo: missing a required argument: 'message'"})),
            tool_message("echo", "hello"),
        ]},
        {"messages": [
            tool_message("<b>x</b>", str({"error": "Tool <b>x</b> not found."})),
            tool_message("echo", str({"error": "EchoAdapter.echo() argument after ** must be a mapping, not str"})),
        ]},
        {"messages": "not a transcript"},
    ]

    collector.record_transcripts(rows, tool_names=["echo"])
    values = collector.drain()

    assert values == {
        "tools/echo/call_total": 1.0,
        "tools/echo/failure_total": 1.0,
        "tools/_b_x_b_/call_total": 1.0,
        "tools/_b_x_b_/failure_total": 1.0,
        "tools/search/call_total": 1.0,
        "tools/search/failure_total": 1.0,
        **errors(unknown_tool=2, invalid_args=1),
    }


def test_invented_names_past_the_cap_are_counted_together(collect):
    collector = collect("echo")
    rows = [{"messages": [
        tool_message(f"t{i}", str({"error": f"Tool t{i} not found."}))
        for i in range(toolstats.MAX_EXTRA_NAMES + 3)
    ]}]

    collector.record_transcripts(rows, tool_names=["echo"])
    values = collector.drain()

    names = {key.split("/")[1] for key in values if key.endswith("/call_total")}
    assert names == {"echo", "_other", *(f"t{i}" for i in range(toolstats.MAX_EXTRA_NAMES))}
    assert (values["tools/_other/call_total"], values["tools/errors/unknown_tool"]) == (
        3.0, float(toolstats.MAX_EXTRA_NAMES + 3),
    )


def test_a_tool_of_another_environment_is_tool_not_found(echo_url, mcpdemo_url, collect):
    Router = router_class({
        "echo": adapter_class(metadata_name="echo", base_url=echo_url, env_name="echo"),
        "mcpdemo": mcp_adapter_class(
            base_url=mcpdemo_url, env_name="mcpdemo", tools=list_mcp_tools(mcpdemo_url)
        ),
    })
    router = Router()
    collector = collect("echo", "add_item", "total")
    router.reset(env="echo")
    with pytest.raises(ValueError, match=r"^Tool 'total' belongs to mcpdemo"):
        router.total()
    assert router.echo(message="hi") == "hi"
    router._current()._close()

    values = collector.drain()

    assert list(latencies(values)) == ["tools/echo/latency_s"]
    assert values == {
        "tools/echo/call_total": 1.0,
        "tools/echo/failure_total": 0.0,
        "tools/add_item/call_total": 0.0,
        "tools/add_item/failure_total": 0.0,
        "tools/total/call_total": 1.0,
        "tools/total/failure_total": 1.0,
        **errors(tool_not_found=1),
    }


def test_an_idle_collector_counts_nothing(echo_url):
    """The web process calls adapters too (console, probes): nothing is kept there."""
    assert not toolstats.COLLECTOR.active
    adapter = adapter_class(metadata_name="echo", base_url=echo_url, env_name="echo")()
    adapter.reset()
    adapter.echo(message="hi")
    adapter._close()

    assert toolstats.COLLECTOR.drain() == {}
    toolstats.COLLECTOR.start(tool_names=[])
    try:
        assert toolstats.COLLECTOR.drain() == NO_ERRORS
    finally:
        toolstats.COLLECTOR.stop()


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (TimeoutError("the environment server did not answer within 120 s"), "timeout"),
        (ConnectionRefusedError("refused"), "transport_error"),
        (RuntimeError("Server error: bad field (code: VALIDATION_ERROR)"), "invalid_args"),
        (RuntimeError("Server error: no such type (code: UNKNOWN_TYPE)"), "tool_not_found"),
        (RuntimeError("Server error: boom (code: EXECUTION_ERROR)"), "execution_error"),
        (RuntimeError("Server error: gone (code: SESSION_ERROR)"), "transport_error"),
        (RuntimeError("Game over."), "execution_error"),
        (EpisodeLost("lost"), "transport_error"),
        (toolstats.tag(EpisodeLost("lost"), "timeout"), "timeout"),
    ],
)
def test_error_classes_of_exceptions(exc, expected):
    assert toolstats.error_class(exc) == expected


def test_ors_failures_take_the_sdks_reason():
    from openreward.api.errors import (
        HeartbeatTimeoutError,
        HTTPStatusError,
        SessionTerminatedError,
        ToolFailed,
    )

    from envs.adapters.ors import _lost_call_class

    assert [
        _lost_call_class(exc)
        for exc in (
            ToolFailed("the tool raised"),
            HeartbeatTimeoutError("no frame"),
            HTTPStatusError(502),
            SessionTerminatedError("gone", sid="s"),
            TimeoutError("the ORS server did not answer within 600 s"),
        )
    ] == ["execution_error", "timeout", "transport_error", "transport_error", "timeout"]


def test_scripted_ors_episode(collect):
    from envs.adapters.ors import ors_adapter_class
    from tests.envs.adapters.test_ors_adapter import ECHO_TASKS, ors_server

    with ors_server(free_port()) as url:
        adapter = ors_adapter_class(base_url=url, env_name="echo")()
        collector = collect("echo")
        adapter.reset(task_index=2)
        with pytest.raises(ValueError, match="string_too_long"):  # the server refuses it
            adapter.echo("x" * 2001)
        with pytest.raises(TypeError):
            adapter.echo()
        adapter.echo("nope")
        adapter.echo(ECHO_TASKS["train"][2]["phrase"])  # right: the episode is over
        with pytest.raises(RuntimeError, match=r"^Game over\.$"):
            adapter.echo("again")
        adapter._close()

    values = collector.drain()

    assert 0 < values.pop("tools/echo/latency_s") < 15
    assert values == one_tool("echo", calls=5.0, failures=3.0, invalid_args=2, execution_error=1)
