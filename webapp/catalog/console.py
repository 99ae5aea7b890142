"""The environment console: one episode of a registered environment, driven by hand.

A console session holds one instance of the same adapter class the trainer would get
(webapp.catalog.adapters.environment_adapter), resets it with a dataset row and calls its tools with arguments a
person typed, so that rewards can be checked before training. What it reports is what
the model would see: a tool's result as TRL turns it into the tool message (`str(...)`),
and a failing tool as the `{'error': ...}` text TRL substitutes.

Everything here is synchronous and blocking (the adapters talk to the environment over
the network): the consumer runs it in a worker thread, one thread per connection, and
validates every message with the `console_parse_*` functions before that.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webapp.catalog.adapters import environment_adapter
from webapp.catalog.toolschema import describe_tools

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 10 * 1024
MAX_OUTPUT_CHARS = 100_000
MAX_ROW_KEY_CHARS = 100
# Seeds travel to servers written in other languages: keep them within a signed 64-bit int.
MAX_SEED = 2**63 - 1
MESSAGE_FIELDS: dict[str, frozenset[str]] = {
    "tools": frozenset({"type"}),
    "ping": frozenset({"type"}),
    "reset": frozenset({"type", "seed", "row"}),
    "call": frozenset({"type", "tool", "arguments"}),
}
# Adapter attributes never shown, whatever an adapter keeps on itself (conventions: secrets).
_SECRET_NAME = re.compile(r"(secret|token|password|passwd|api_?key|credential)", re.IGNORECASE)
_INTEGER_TEXT = re.compile(r"[+-]?\d{1,30}")
_NUMBER_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d{1,3})?")
# TRL (transformers' get_json_schema) reads an enum from an argument's description.
_CHOICES = re.compile(r"\(choices:\s*(.*?)\)\s*$", re.IGNORECASE)
_MAX_STATE_DEPTH = 3
_MAX_STATE_ITEMS = 100
_MAX_STATE_TEXT = 2_000


class ConsoleRejected(ValueError):
    """A message the console refuses; the text says what to fix."""


# --- the edge: messages from the browser -----------------------------------------------------


def console_parse_message(*, text: str | None) -> dict[str, Any]:
    """One WebSocket frame as a console message: a JSON object of a known type and fields."""
    if text is None:
        raise ConsoleRejected("send JSON text frames, not binary ones")
    if len(text.encode("utf-8", errors="replace")) > MAX_MESSAGE_BYTES:
        raise ConsoleRejected(f"message larger than {MAX_MESSAGE_BYTES // 1024} kB")
    try:
        content = json.loads(text)
    except (ValueError, RecursionError):
        raise ConsoleRejected("message is not valid JSON") from None
    if not isinstance(content, dict):
        raise ConsoleRejected("message must be a JSON object with a 'type'")
    kind = content.get("type")
    if not isinstance(kind, str) or kind not in MESSAGE_FIELDS:
        raise ConsoleRejected(
            f"unknown message type {_short(kind)}: expected one of {', '.join(MESSAGE_FIELDS)}"
        )
    unexpected = sorted(set(content) - MESSAGE_FIELDS[kind])
    if unexpected:
        raise ConsoleRejected(
            f"unexpected field(s) in a '{kind}' message: {', '.join(map(_short, unexpected))}"
        )
    return content


def console_parse_reset(*, content: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset row a reset message asks for: its `row` object, with `seed` set when given."""
    seed = content.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConsoleRejected("seed must be a whole number or null")
    if seed is not None and abs(seed) > MAX_SEED:
        raise ConsoleRejected(f"seed must be between -{MAX_SEED} and {MAX_SEED}")
    row = content.get("row")
    if row is None:
        row = {}
    if not isinstance(row, dict):
        raise ConsoleRejected(
            'row must be a JSON object of dataset-row fields, e.g. {"target": "hello"}'
        )
    for key in row:
        if not key or len(key) > MAX_ROW_KEY_CHARS:
            raise ConsoleRejected(f"row field names must be 1 to {MAX_ROW_KEY_CHARS} characters")
    row = dict(row)
    if seed is not None:
        row["seed"] = seed
    return row


def console_parse_call(
    *, content: Mapping[str, Any], tools: list[dict[str, Any]]
) -> tuple[str, dict[str, Any]]:
    """The tool and its arguments, coerced to the types of the tool's schema."""
    name = content.get("tool")
    by_name = {tool["name"]: tool for tool in tools}
    if not isinstance(name, str) or name not in by_name:
        offered = ", ".join(sorted(by_name)) or "none"
        raise ConsoleRejected(
            f"unknown tool {_short(name)}: this environment's tools are {offered}"
        )
    arguments = content.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ConsoleRejected("arguments must be a JSON object of parameter names to values")
    parameters = by_name[name]["parameters"]
    properties: dict[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        known = ", ".join(properties) or "none"
        raise ConsoleRejected(
            f"{name}() has no parameter(s) {', '.join(map(_short, unknown))}; its parameters are: {known}"
        )
    coerced: dict[str, Any] = {}
    for parameter, schema in properties.items():
        value = arguments.get(parameter)
        if value is None or (value == "" and _types(schema) != ["string"]):
            if parameter in required:
                raise ConsoleRejected(f"{name}() needs a value for '{parameter}'")
            continue
        coerced[parameter] = _coerce(parameter, value, schema)
    return name, coerced


def _types(schema: Mapping[str, Any]) -> list[str]:
    declared = schema.get("type", "string")
    return [str(t) for t in declared] if isinstance(declared, list) else [str(declared)]


def _coerce(parameter: str, value: Any, schema: Mapping[str, Any]) -> Any:
    """`value` as one of the schema's types; text from a form field is read as that type."""
    types = _types(schema)
    for json_type in types:
        converter = _CONVERTERS.get(json_type)
        if converter is None:
            continue
        try:
            converted = converter(value)
        except (ValueError, TypeError, RecursionError):
            continue
        enum = schema.get("enum")
        if isinstance(enum, list) and enum and converted not in enum:
            choices = ", ".join(json.dumps(choice) for choice in enum)
            raise ConsoleRejected(
                f"'{parameter}' must be one of {choices}, got {_short(converted)}"
            )
        return converted
    wanted = " or ".join(types)
    raise ConsoleRejected(f"'{parameter}' must be of type {wanted}, got {_short(value)}")


def _to_integer(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError("a boolean is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value.strip()):
        return int(value.strip())
    raise ValueError("not an integer")


def _to_number(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value.strip()):
        number = float(value.strip())
        if math.isfinite(number):
            return number
    raise ValueError("not a finite number")


def _to_boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("not a boolean")


def _to_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise TypeError("not a string")


def _json_of(kind: type) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if isinstance(value, str):
            value = json.loads(value)
        if not isinstance(value, kind):
            raise TypeError(f"not a JSON {kind.__name__}")
        return value

    return convert


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "integer": _to_integer,
    "number": _to_number,
    "boolean": _to_boolean,
    "string": _to_string,
    "array": _json_of(list),
    "object": _json_of(dict),
}


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- tools and state as the page sees them ----------------------------------------------------


def console_tools(*, adapter_class: type) -> list[dict[str, Any]]:
    """The adapter's tools as TRL describes them to the model, `(choices: [...])` read as enums."""
    tools = describe_tools(adapter_class)
    for tool in tools:
        for schema in tool["parameters"]["properties"].values():
            match = _CHOICES.search(schema.get("description") or "")
            if match is None or "enum" in schema:
                continue
            try:
                choices = json.loads(match.group(1))
            except ValueError:
                continue
            if isinstance(choices, list) and choices:
                schema["enum"] = [c.strip() if isinstance(c, str) else c for c in choices]
                schema["description"] = schema["description"][: match.start()].strip()
    return tools


def adapter_state(adapter: Any) -> dict[str, Any]:
    """The adapter's public, non-callable instance attributes that JSON can carry.

    Reward terms read these (`reward`, `lost`, `won`, `num_guesses`, ...). Private ones,
    secrets by name, and values JSON cannot carry (clients, threads) are left out.
    """
    state: dict[str, Any] = {}
    for name, value in sorted(vars(adapter).items()):
        if name.startswith("_") or callable(value) or _SECRET_NAME.search(name):
            continue
        safe, ok = _json_safe(value, 0)
        if ok:
            state[name] = safe
    return state


def _json_safe(value: Any, depth: int) -> tuple[Any, bool]:
    if value is None or isinstance(value, (bool, int)):
        return value, True
    if isinstance(value, float):
        # NaN and infinities are not JSON: the browser's JSON.parse would refuse the message.
        return (value if math.isfinite(value) else str(value)), True
    if isinstance(value, str):
        return (value if len(value) <= _MAX_STATE_TEXT else value[:_MAX_STATE_TEXT] + "…"), True
    if depth >= _MAX_STATE_DEPTH:
        return None, False
    if isinstance(value, (list, tuple)) and len(value) <= _MAX_STATE_ITEMS:
        items = [_json_safe(item, depth + 1) for item in value]
        return [item for item, _ in items], all(ok for _, ok in items)
    if (
        isinstance(value, dict)
        and len(value) <= _MAX_STATE_ITEMS
        and all(isinstance(k, str) for k in value)
    ):
        pairs = {key: _json_safe(item, depth + 1) for key, item in value.items()}
        return {key: item for key, (item, _) in pairs.items()}, all(ok for _, ok in pairs.values())
    return None, False


def model_text(result: Any) -> str:
    """A tool's result as TRL puts it in the tool message (lists of content blocks aside)."""
    if isinstance(result, list):
        text = json.dumps(result, default=str)
    else:
        text = str(result)
    if len(text) > MAX_OUTPUT_CHARS:
        return (
            text[:MAX_OUTPUT_CHARS]
            + f"\n… ({len(text) - MAX_OUTPUT_CHARS} more characters not shown)"
        )
    return text


def error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


# --- the session ------------------------------------------------------------------------------


@dataclass
class ConsoleSession:
    """One console connection's adapter. Not thread-safe: one thread drives it."""

    environment: Any
    # Whose stored keys an Open Reward catalog environment uses: the console's own user.
    user: Any = None
    adapter_class: type | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    adapter: Any = None
    in_episode: bool = False

    def bind(self) -> list[dict[str, Any]]:
        """Build the adapter class (may import openenv and read the server's schema)."""
        if self.adapter_class is None:

            adapter_class = environment_adapter(self.environment, owner=self.user)
            self.tools = console_tools(adapter_class=adapter_class)
            self.adapter_class = adapter_class
        return self.tools

    def reset(self, *, row: dict[str, Any]) -> dict[str, Any]:
        """`reset(**row)` on a fresh episode; the observation is what TRL appends to the prompt."""
        self.bind()
        assert self.adapter_class is not None
        if self.adapter is None:
            self.adapter = self.adapter_class()
        self.in_episode = False
        observation = self.adapter.reset(**row)
        self.in_episode = True
        return {
            "observation": None if observation is None else model_text(observation),
            "state": self.state(),
        }

    def call(self, *, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One tool call; the tool's exception propagates (its text is what the model sees)."""
        if not self.in_episode or self.adapter is None:
            raise ConsoleRejected("no episode yet: reset first")
        result = getattr(self.adapter, tool)(**arguments)
        return {"output": model_text(result), "state": self.state()}

    def state(self) -> dict[str, Any]:
        return adapter_state(self.adapter) if self.adapter is not None else {}

    def detached(self) -> ConsoleSession:
        """A session without this one's adapter (left to a thread that never came back)."""
        return ConsoleSession(
            environment=self.environment, adapter_class=self.adapter_class, tools=self.tools
        )

    def close(self) -> None:
        adapter, self.adapter = self.adapter, None
        self.in_episode = False
        if adapter is not None and hasattr(adapter, "_close"):
            try:
                adapter._close()  # noqa: SLF001 - public adapter methods are the model's tools
            except Exception as exc:  # a dead server cannot be closed politely
                log.debug(
                    "closing the console adapter of %s failed: %s", self.environment.name, exc
                )


# --- rate limit --------------------------------------------------------------------------------


class RateLimiter:
    """A token bucket: `rate` messages a second on average, bursts of up to `burst`."""

    def __init__(
        self, *, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def allow(self) -> bool:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False
