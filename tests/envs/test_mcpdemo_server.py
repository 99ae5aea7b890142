"""The mcpdemo environment (MCP-style) over the wire: a real uvicorn server, raw messages."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from envs.mcpdemo.server import McpDemoEnvironment, target_for_seed
from tests.envs.servers import run_env_server
from tests.envs.wire import SERVER_ENV, assert_openenv_validate_passes

APP = "envs.mcpdemo.server:app"
SEED_3_INSTRUCTION = (
    "Build a shopping list whose quantities add up to exactly 5: add items with "
    "add_item(name, quantity), then call total() to check. You have 8 tool calls; a "
    "matching total() scores 1.0 and ends the episode."
)
NOT_STARTED = (
    "Error calling tool 'total': No episode in progress: call reset() first "
    "(a restarted server gives a reconnecting client a fresh environment)"
)
TOOLS = [
    {
        "name": "add_item",
        "description": "Add some of an item to the shopping list; quantities of one name add up.",
        "inputSchema": {
            "additionalProperties": False,
            "properties": {
                "name": {
                    "description": "Item to add, e.g. 'apple'",
                    "maxLength": 64,
                    "minLength": 1,
                    "type": "string",
                },
                "quantity": {
                    "description": "How many to add (1-100)",
                    "maximum": 100,
                    "minimum": 1,
                    "type": "integer",
                },
            },
            "required": ["name", "quantity"],
            "type": "object",
        },
    },
    {
        "name": "total",
        "description": "The total quantity on the shopping list, checked against the target if any.",
        "inputSchema": {"additionalProperties": False, "properties": {}, "type": "object"},
    },
]


def get_json(url: str, body: Any = None) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with opener.open(request, timeout=5) as response:
        assert response.status == 200
        return json.load(response)


def send(ws: ClientConnection, message: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(message))
    reply: dict[str, Any] = json.loads(ws.recv(timeout=10))
    return reply


def call(ws: ClientConnection, tool: str, **arguments: Any) -> dict[str, Any]:
    step = {"type": "call_tool", "tool_name": tool, "arguments": arguments}
    reply = send(ws, {"type": "step", "data": step})
    assert reply["type"] == "observation"
    data: dict[str, Any] = reply["data"]
    return data


@pytest.fixture(scope="module")
def mcpdemo_url() -> Iterator[str]:
    with run_env_server(APP, {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "4"}) as url:
        yield url


@pytest.fixture
def ws(mcpdemo_url: str) -> Iterator[ClientConnection]:
    with ws_connect(mcpdemo_url.replace("http://", "ws://") + "/ws", proxy=None) as socket:
        yield socket


# --- in-process units -------------------------------------------------------------


def test_target_for_seed_is_reproducible() -> None:
    assert [target_for_seed(seed) for seed in range(6)] == [8, 4, 2, 5, 5, 6]


def test_reset_targets() -> None:
    env = McpDemoEnvironment()
    seeded = env.reset(seed=3, episode_id="ep-1")
    assert seeded.instruction == SEED_3_INSTRUCTION
    assert seeded.metadata == {"episode_id": "ep-1", "step_count": 0, "max_steps": 8}
    assert (env.state.target, env.state.items, env.state.done) == (5, {}, False)
    assert env.reset(seed=3, target=7).instruction.startswith(
        "Build a shopping list whose quantities add up to exactly 7:"
    )
    assert env.reset().instruction == (
        "Add items with add_item(name, quantity); total() returns the sum of the quantities. "
        "The episode ends after 8 tool calls."
    )
    assert env.state.target is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": True}, "target must be an integer, got bool"),
        ({"target": 0}, "target must be between 1 and 800"),
        ({"seed": "x"}, "seed must be an integer, got str"),
        ({"episode_id": 5}, "episode_id must be a string"),
    ],
)
def test_reset_rejects_bad_input(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        McpDemoEnvironment().reset(**kwargs)
    assert str(excinfo.value) == message


# --- over the wire ----------------------------------------------------------------


def test_http_routes(mcpdemo_url: str) -> None:
    assert get_json(f"{mcpdemo_url}/health") == {"status": "healthy"}
    metadata = get_json(f"{mcpdemo_url}/metadata")
    assert (metadata["name"], metadata["version"], metadata["author"]) == (
        "mcpdemo",
        "0.1.0",
        "envlab",
    )
    assert metadata["description"].startswith(
        "An MCP-style shopping list: add_item(name, quantity)"
    )
    schema = get_json(f"{mcpdemo_url}/schema")
    assert set(schema) == {"action", "observation", "reset_observation", "state"}
    assert schema["action"]["title"] == "CallToolAction"
    assert schema["action"]["required"] == ["tool_name"]
    assert schema["observation"]["title"] == "CallToolObservation"
    assert list(schema["reset_observation"]["properties"]) == [
        "done",
        "reward",
        "metadata",
        "instruction",
    ]
    assert list(schema["state"]["properties"]) == [
        "episode_id",
        "step_count",
        "target",
        "items",
        "max_steps",
        "done",
    ]


def test_tools_list_over_http_mcp(mcpdemo_url: str) -> None:
    request = {"jsonrpc": "2.0", "method": "tools/list", "params": {}, "id": 7}
    answer = get_json(f"{mcpdemo_url}/mcp", request)
    assert (answer["jsonrpc"], answer["id"], answer.get("error")) == ("2.0", 7, None)
    listed = [
        {key: tool[key] for key in ("name", "description", "inputSchema")}
        for tool in answer["result"]["tools"]
    ]
    assert listed == TOOLS


def test_tools_list_over_ws_step(ws: ClientConnection) -> None:
    reply = send(ws, {"type": "step", "data": {"type": "list_tools"}})
    tools = reply["data"]["observation"]["tools"]
    assert [tool["name"] for tool in tools] == ["add_item", "total"]
    assert tools[0]["input_schema"] == TOOLS[0]["inputSchema"]
    # Listing tools is not a move: no episode bookkeeping, no reward.
    assert (reply["data"]["reward"], reply["data"]["done"]) == (None, False)


def test_episode_state_reward_and_end(ws: ClientConnection) -> None:
    reset = send(ws, {"type": "reset", "data": {"seed": 3}})
    episode_id = reset["data"]["metadata"]["episode_id"]
    assert reset["data"]["observation"]["instruction"] == SEED_3_INSTRUCTION
    assert (reset["data"]["reward"], reset["data"]["done"]) == (None, False)

    first = call(ws, "add_item", name=" Apple ", quantity=2)
    assert first["observation"]["result"]["data"] == "apple: 2. Total quantity: 2."
    assert first["observation"]["error"] is None
    assert (first["reward"], first["done"]) == (0.0, False)
    assert first["metadata"] == {"episode_id": episode_id, "step_count": 1, "max_steps": 8}

    assert call(ws, "add_item", name="pear", quantity=2)["observation"]["result"]["data"] == (
        "pear: 2. Total quantity: 4."
    )
    short = call(ws, "total")
    assert (short["observation"]["result"]["data"], short["reward"], short["done"]) == (
        4,
        0.0,
        False,
    )
    call(ws, "add_item", name="apple", quantity=1)
    hit = call(ws, "total")
    assert (hit["observation"]["result"]["data"], hit["reward"], hit["done"]) == (5, 1.0, True)
    assert hit["metadata"] == {"episode_id": episode_id, "step_count": 5, "max_steps": 8}

    over = call(ws, "total")
    assert over["observation"]["error"] == {
        "error_type": "execution_error",
        "message": f"Error calling tool 'total': Episode {episode_id} is over: call reset() to start a new one",
    }
    assert (over["reward"], over["done"], over["metadata"]["step_count"]) == (None, True, 5)
    state = send(ws, {"type": "state"})["data"]
    assert state == {
        "episode_id": episode_id,
        "step_count": 5,
        "target": 5,
        "items": {"apple": 3, "pear": 2},
        "max_steps": 8,
        "done": True,
    }

    again = send(ws, {"type": "reset", "data": {}})
    assert again["data"]["metadata"]["episode_id"] != episode_id
    assert call(ws, "total")["observation"]["result"]["data"] == 0


def test_tool_errors_count_as_steps(ws: ClientConnection) -> None:
    send(ws, {"type": "reset", "data": {}})
    bad = call(ws, "add_item", name="x", quantity=0)
    assert bad["observation"]["result"] is None
    assert bad["observation"]["error"]["error_type"] == "execution_error"
    assert "Input should be greater than or equal to 1" in bad["observation"]["error"]["message"]
    unknown = call(ws, "checkout")
    assert unknown["observation"]["error"] == {
        "error_type": "tool_not_found",
        "message": "Unknown tool: 'checkout'",
    }
    assert [bad["metadata"]["step_count"], unknown["metadata"]["step_count"]] == [1, 2]
    assert [bad["reward"], unknown["reward"]] == [0.0, 0.0]


def test_step_limit_ends_episode(ws: ClientConnection) -> None:
    send(ws, {"type": "reset", "data": {}})
    results = [call(ws, "add_item", name="egg", quantity=1) for _ in range(8)]
    assert [r["done"] for r in results] == [False] * 7 + [True]
    assert results[-1]["observation"]["result"]["data"] == "egg: 8. Total quantity: 8."
    assert call(ws, "total")["observation"]["error"]["message"].endswith(
        "is over: call reset() to start a new one"
    )


def test_call_before_reset_is_refused(ws: ClientConnection) -> None:
    refused = call(ws, "total")
    assert refused["observation"]["error"] == {
        "error_type": "execution_error",
        "message": NOT_STARTED,
    }
    assert refused["metadata"] == {"episode_id": None, "step_count": 0, "max_steps": 8}
    assert (refused["reward"], refused["done"]) == (None, False)


def test_sessions_are_independent(mcpdemo_url: str) -> None:
    ws_url = mcpdemo_url.replace("http://", "ws://") + "/ws"
    with ws_connect(ws_url, proxy=None) as a, ws_connect(ws_url, proxy=None) as b:
        send(a, {"type": "reset", "data": {}})
        send(b, {"type": "reset", "data": {}})
        call(a, "add_item", name="milk", quantity=3)
        call(b, "add_item", name="tea", quantity=1)
        assert call(a, "total")["observation"]["result"]["data"] == 3
        assert call(b, "total")["observation"]["result"]["data"] == 1


def test_openenv_validate(mcpdemo_url: str, tmp_path: Path) -> None:
    assert_openenv_validate_passes(mcpdemo_url, tmp_path)
