"""The environment console's pure parts: message checks, argument coercion from a tool's
schema, the adapter's public state and the rate limiter (no server, no database)."""

from __future__ import annotations

import math
import threading
from typing import Any, Literal

import pytest

from webapp.catalog.console import (
    ConsoleRejected,
    RateLimiter,
    adapter_state,
    console_parse_call,
    console_parse_message,
    console_parse_reset,
    console_tools,
)

# --- the pure parts ---------------------------------------------------------------------------


class _Board:
    """An adapter-shaped class for the schema readers (no server: nothing is called)."""

    def reset(self, **row: Any) -> str | None:
        return None

    def place(self, row: int, column: int, weight: float = 1.0, note: str | None = None) -> str:
        """Place a piece.

        Args:
            row: Row, from 1.
            column: Column, from 1.
            weight: How sure.
            note: Anything.
        """
        return ""

    def move(self, direction: str, fast: bool = False, path: list[int] | None = None) -> str:
        """Move.

        Args:
            direction: Where to. (choices: ["left", "right"])
            fast: Run.
            path: Waypoints.
        """
        return ""

    def turn(self, side: Literal["port", "starboard"]) -> str:
        """Turn.

        Args:
            side: Which side.
        """
        return ""


BOARD_TOOLS = console_tools(adapter_class=_Board)


def _call(tool: str, arguments: Any) -> tuple[str, dict[str, Any]]:
    return console_parse_call(
        content={"type": "call", "tool": tool, "arguments": arguments}, tools=BOARD_TOOLS
    )


def test_choices_in_a_description_become_an_enum():
    move = next(t for t in BOARD_TOOLS if t["name"] == "move")
    assert move["parameters"]["properties"]["direction"] == {
        "type": "string",
        "description": "Where to.",
        "enum": ["left", "right"],
    }


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("place", {"row": "3", "column": 4.0}, {"row": 3, "column": 4}),
        (
            "place",
            {"row": 1, "column": 2, "weight": "0.5", "note": ""},
            {"row": 1, "column": 2, "weight": 0.5, "note": ""},
        ),
        ("place", {"row": 1, "column": 2, "weight": "", "note": None}, {"row": 1, "column": 2}),
        (
            "move",
            {"direction": "left", "fast": "true", "path": "[1, 2]"},
            {"direction": "left", "fast": True, "path": [1, 2]},
        ),
        ("move", {"direction": "right", "path": [3]}, {"direction": "right", "path": [3]}),
        ("turn", {"side": "port"}, {"side": "port"}),
    ],
)
def test_arguments_are_coerced_to_the_schema(tool, arguments, expected):
    assert _call(tool, arguments) == (tool, expected)


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("place", {"row": "three", "column": 1}, "'row' must be of type integer, got 'three'"),
        ("place", {"row": 1.5, "column": 1}, "'row' must be of type integer, got 1.5"),
        ("place", {"row": True, "column": 1}, "'row' must be of type integer, got true"),
        (
            "place",
            {"row": 1, "column": 1, "weight": "nan"},
            "'weight' must be of type number, got 'nan'",
        ),
        ("place", {"row": 1}, "place() needs a value for 'column'"),
        ("place", {"row": "", "column": 1}, "place() needs a value for 'row'"),
        ("move", {"direction": "up"}, "'direction' must be one of \"left\", \"right\", got 'up'"),
        ("move", {"direction": "left", "fast": "yes"}, "'fast' must be of type boolean, got 'yes'"),
        ("move", {"direction": "left", "path": "[1,"}, "'path' must be of type array, got '[1,'"),
        ("turn", {"side": "aft"}, "'side' must be one of \"port\", \"starboard\", got 'aft'"),
        ("reset", {}, "unknown tool 'reset': this environment's tools are move, place, turn"),
    ],
)
def test_bad_arguments_say_what_to_fix(tool, arguments, message):
    with pytest.raises(ConsoleRejected) as refused:
        _call(tool, arguments)
    assert str(refused.value) == message


def test_reset_row_takes_the_seed():
    assert console_parse_reset(
        content={"type": "reset", "seed": 7, "row": {"target": "hi", "seed": 1}}
    ) == {
        "target": "hi",
        "seed": 7,
    }
    assert console_parse_reset(content={"type": "reset", "seed": None, "row": {"seed": 1}}) == {
        "seed": 1
    }
    assert console_parse_reset(content={"type": "reset"}) == {}
    with pytest.raises(ConsoleRejected, match="row must be a JSON object"):
        console_parse_reset(content={"type": "reset", "row": [1]})
    with pytest.raises(ConsoleRejected, match="seed must be between"):
        console_parse_reset(content={"type": "reset", "seed": 2**64})


def test_messages_are_checked_before_anything_else():
    assert console_parse_message(text='{"type": "tools"}') == {"type": "tools"}
    for text, message in [
        (None, "send JSON text frames, not binary ones"),
        ("[1]", "message must be a JSON object with a 'type'"),
        ('{"type": 1}', "unknown message type 1: expected one of tools, ping, reset, call"),
        ('{"type": "tools", "x": 1}', "unexpected field(s) in a 'tools' message: 'x'"),
        ("é" * 6000, "message larger than 10 kB"),  # counted in bytes, not characters
    ]:
        with pytest.raises(ConsoleRejected) as refused:
            console_parse_message(text=text)
        assert str(refused.value) == message


def test_adapter_state_is_public_json_safe_attributes():
    class Adapter:
        def __init__(self) -> None:
            self._client = object()
            self.reward = 0.5
            self.won = True
            self.num_guesses = 3
            self.history = [{"guess": "crane", "marks": "GYXXX"}]
            self.progress = math.nan
            self.api_key = "sk-secret"
            self.lock = threading.Lock()
            self.callback = print
            self.last = None

    assert adapter_state(Adapter()) == {
        "history": [{"guess": "crane", "marks": "GYXXX"}],
        "last": None,
        "num_guesses": 3,
        "progress": "nan",
        "reward": 0.5,
        "won": True,
    }


def test_rate_limiter_allows_bursts_then_the_rate():
    now = [100.0]
    limiter = RateLimiter(rate=20, burst=20, clock=lambda: now[0])
    first = [limiter.allow() for _ in range(21)]
    now[0] += 0.125  # two and a half tokens back
    later = [limiter.allow() for _ in range(3)]
    assert first == [True] * 20 + [False]
    assert later == [True, True, False]
