"""The per-tool metric keys the lab logs each step, and how a transcript shows tool results.

Shared by the worker (envs/adapters/toolstats.py logs the keys, webapp/runs/telemetry/health.py reads tool
results) and the run page (webapp/runs/telemetry/tools.py sums the keys): pure, no Django import.

Keys, per step (the names TRL's async trainer uses, summed exactly over the step):
  tools/<name>/call_total     calls of the tool
  tools/<name>/failure_total  of those, calls that failed
  tools/<name>/latency_s      mean seconds per timed call (absent when none was timed)
  tools/errors/<class>        failed calls of every tool, by ERROR_CLASSES
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

# OpenEnv's MCP error taxonomy (openenv.core.env_server.mcp_types.ToolErrorType), plus the
# model's call of a tool the environment does not have (TRL answers it itself).
EXECUTION_ERROR = "execution_error"
INVALID_ARGS = "invalid_args"
TRANSPORT_ERROR = "transport_error"
TOOL_NOT_FOUND = "tool_not_found"
TIMEOUT = "timeout"
UNKNOWN_TOOL = "unknown_tool"
ERROR_CLASSES = (
    EXECUTION_ERROR,
    INVALID_ARGS,
    TRANSPORT_ERROR,
    TOOL_NOT_FOUND,
    TIMEOUT,
    UNKNOWN_TOOL,
)

CALLS, FAILURES, LATENCY = "call_total", "failure_total", "latency_s"
ERRORS_PREFIX = "tools/errors/"
# A metric key holds at most 120 characters: "tools/" + name + "/failure_total" fits.
MAX_TOOL_NAME = 64
OTHER_TOOLS = "_other"  # where names past the worker's cap are counted

# How TRL 1.16 hands a tool's exception to the model: str({"error": str(exc)}).
ERROR_PREFIX = "{'error': "
# TRL 1.16's answer to a call of a name the environment has no tool for.
UNKNOWN_TOOL_ERROR = "Tool {name} not found."
# TRL's own TypeError when a call's arguments are not a JSON object: no tool ran.
NOT_A_MAPPING = "argument after ** must be a mapping"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_tool_name(raw: Any) -> str:
    """A tool name fit for a metric key: the model may call any text a tool."""
    text = _UNSAFE.sub("_", str(raw if raw is not None else ""))[:MAX_TOOL_NAME]
    return text or "unknown"


def tool_key(name: str, field: str) -> str:
    return f"tools/{name}/{field}"


def error_key(error_class: str) -> str:
    return f"{ERRORS_PREFIX}{error_class}"


def parse_tool_key(key: str) -> tuple[str, str] | None:
    """`(name, field)` of a per-tool key, None for any other key (error classes included)."""
    if not key.startswith("tools/") or key.startswith(ERRORS_PREFIX):
        return None
    name, _, field = key[len("tools/") :].rpartition("/")
    if not name or "/" in name or field not in (CALLS, FAILURES, LATENCY):
        return None
    return name, field


def error_text(content: Any) -> str | None:
    """The error message of a tool result that reports a failure, None for any other result.

    TRL writes `str({"error": message})`: read back as a literal (never evaluated), so
    quotes and newlines in the message come back as they were."""
    if not (isinstance(content, str) and content.startswith(ERROR_PREFIX)):
        return None
    try:
        value = ast.literal_eval(content)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = None
    if isinstance(value, dict) and isinstance(value.get("error"), str):
        return str(value["error"])
    return content[len(ERROR_PREFIX) :].rstrip("}").strip().strip("'\"")


class ToolResult(NamedTuple):
    name: str  # as the transcript has it (model text: escape it wherever it is shown)
    error: str | None  # the failure's message, None for a result that is not a failure


def tool_results(messages: Any) -> Iterator[ToolResult]:
    """The tool results of one transcript (its `role: tool` messages), in order."""
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, dict) and message.get("role") == "tool":
            yield ToolResult(
                str(message.get("name") or "unknown"), error_text(message.get("content"))
            )


def tool_call_names(messages: Any) -> Iterator[str]:
    """The tool names the assistant turns of one transcript call, in order."""
    for message in messages if isinstance(messages, list) else ():
        if not (isinstance(message, dict) and message.get("role") == "assistant"):
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                yield str(function.get("name") or "unknown")


def untried_call_class(name: str, error: str, known: Iterable[str]) -> str | None:
    """The error class of a failure TRL answered without calling any tool, None when a tool
    ran (the adapters count those themselves)."""
    if name not in known and error == UNKNOWN_TOOL_ERROR.format(name=name):
        return UNKNOWN_TOOL
    if name in known and NOT_A_MAPPING in error:
        return INVALID_ARGS
    return None
