"""Per-tool calls, failures, latency and error classes, counted where the calls happen.

The adapters' tool wrapper (envs/adapters/base.py) records every call with its duration
and, for a failure, its error class (envs/adapters/tool_metrics.py: OpenEnv's MCP taxonomy
plus `unknown_tool`). Calls TRL answers itself, without calling any tool (a tool name the
environment does not have), are counted from the batch's transcripts. The training
callback drains the counts once per logged step into the step's metrics: sums, so the
numbers are exact per step, unlike TRL's own per-step averages.

One collector per process, idle (each record a no-op) until the runner starts it: the web
process, which also calls adapters (the console, probes), never collects. Cost per call:
a lock and a few counter updates; no I/O.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from envs.adapters.tool_metrics import (
    CALLS,
    ERROR_CLASSES,
    EXECUTION_ERROR,
    FAILURES,
    INVALID_ARGS,
    LATENCY,
    OTHER_TOOLS,
    TIMEOUT,
    TOOL_NOT_FOUND,
    TRANSPORT_ERROR,
    error_key,
    safe_tool_name,
    tool_key,
    tool_results,
    untried_call_class,
)

log = logging.getLogger(__name__)

# Names outside the environment's tools (the model's inventions) a run may add as metric
# keys; later ones are counted under OTHER_TOOLS.
MAX_EXTRA_NAMES = 16

# openenv's client raises RuntimeError("Server error: ... (code: X)") for an error frame.
_OPENENV_CODES = {
    "VALIDATION_ERROR": INVALID_ARGS,
    "INVALID_JSON": INVALID_ARGS,
    "UNKNOWN_TYPE": TOOL_NOT_FOUND,
    "EXECUTION_ERROR": EXECUTION_ERROR,
    "CAPACITY_REACHED": TRANSPORT_ERROR,
    "SESSION_ERROR": TRANSPORT_ERROR,
    "FACTORY_ERROR": TRANSPORT_ERROR,
}
_TRANSPORT_MODULES = ("websockets", "aiohttp", "httpx", "httpcore", "urllib3", "requests")


def tag(exc: BaseException, error_class: str) -> BaseException:
    """Mark `exc` with its error class where the code that raises it knows it best."""
    try:
        exc.envlab_error_class = error_class  # type: ignore[attr-defined]  # a tag on any exception
    except Exception:  # an exception type without a __dict__: classified by type
        pass
    return exc


def error_class(exc: BaseException) -> str:
    """The error class of a tool call that raised `exc`."""
    tagged = getattr(exc, "envlab_error_class", None)
    if tagged in ERROR_CLASSES:
        return str(tagged)
    if isinstance(exc, TimeoutError):  # the loops' own timeouts (envs/adapters/loop.py, ors.py)
        return TIMEOUT
    if isinstance(exc, json.JSONDecodeError):  # a server that answered something else
        return TRANSPORT_ERROR
    if (
        isinstance(exc, ConnectionError | OSError)
        or type(exc).__module__.split(".")[0] in _TRANSPORT_MODULES
    ):
        return TRANSPORT_ERROR
    if isinstance(exc, TypeError) or type(exc).__name__ == "ValidationError":
        return INVALID_ARGS  # arguments the call signature or the action model refused
    if isinstance(exc, ValueError):
        return INVALID_ARGS  # the adapters raise ValueError for arguments they refuse
    if isinstance(exc, RuntimeError):
        text = str(exc)
        if text.startswith("Server error: ") and text.endswith(")"):
            code = text.rpartition("(code: ")[2].rstrip(")")
            return _OPENENV_CODES.get(code, EXECUTION_ERROR)
    return EXECUTION_ERROR


class ToolStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active = False
        self._known: tuple[str, ...] = ()
        self._names: set[str] = set()  # every name counted this run, known or not
        self._reset_counts()

    def _reset_counts(self) -> None:
        self._calls: Counter[str] = Counter()
        self._failures: Counter[str] = Counter()
        self._seconds: dict[str, float] = {}
        self._timed: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()

    def start(self, *, tool_names: Iterable[str]) -> None:
        """Count from now on, for a run whose environment has `tool_names`."""
        with self._lock:
            self._reset_counts()
            self._known = tuple(dict.fromkeys(safe_tool_name(n) for n in tool_names))
            self._names = set(self._known)
            self.active = True

    def stop(self) -> None:
        with self._lock:
            self.active = False
            self._reset_counts()

    def record(self, name: str, seconds: float | None, error: str | None) -> None:
        """One call of tool `name` (a safe name): its duration (None: not timed) and, if it
        failed, its error class."""
        if not self.active:
            return
        with self._lock:
            name = self._counted_name(name)
            self._calls[name] += 1
            if seconds is not None:
                self._seconds[name] = self._seconds.get(name, 0.0) + seconds
                self._timed[name] += 1
            if error is not None:
                self._failures[name] += 1
                self._errors[error if error in ERROR_CLASSES else EXECUTION_ERROR] += 1

    def record_transcripts(self, rows: list[dict[str, Any]], *, tool_names: Iterable[str]) -> None:
        """Failures TRL answered itself in these rollouts (no tool ran, so no adapter saw
        them). `tool_names`: the names TRL offered (the raw method names).

        A result TRL dropped because it would overrun max_completion_length leaves no
        trace here: such a call is not counted."""
        if not self.active:
            return
        known = set(tool_names)
        for row in rows:
            for result in tool_results(row.get("messages")):
                if result.error is None:
                    continue
                found = untried_call_class(result.name, result.error, known)
                if found is not None:
                    self.record(safe_tool_name(result.name), None, found)

    def _counted_name(self, name: str) -> str:
        if name in self._names:
            return name
        if len(self._names) - len(self._known) >= MAX_EXTRA_NAMES:
            return OTHER_TOOLS
        self._names.add(name)
        return name

    def drain(self) -> dict[str, float]:
        """The counts since the last drain as metrics, and start counting afresh. Every
        tool of the environment and every error class gets its count, zero included."""
        return counts_metrics(self.take())

    def take(self) -> dict[str, Any] | None:
        """The raw counts since the last take, and start counting afresh; None while not
        counting. Plain data: the training processes of one run send theirs to the first,
        which adds them up (`merge_counts`) before they become metrics."""
        if not self.active:
            return None
        with self._lock:
            raw = {
                "known": list(self._known),
                "calls": dict(self._calls),
                "failures": dict(self._failures),
                "seconds": dict(self._seconds),
                "timed": dict(self._timed),
                "errors": dict(self._errors),
            }
            self._reset_counts()
        return raw


_COUNTERS = ("calls", "failures", "seconds", "timed", "errors")


def merge_counts(parts: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The sum of several processes' `take()`s (None where none was counting)."""
    found = [part for part in parts if part]
    if not found:
        return None
    merged: dict[str, Any] = {"known": list(dict.fromkeys(n for part in found for n in part["known"]))}
    for counter in _COUNTERS:
        total: dict[str, float] = {}
        for part in found:
            for name, value in part[counter].items():
                total[name] = total.get(name, 0) + value
        merged[counter] = total
    return merged


def counts_metrics(raw: dict[str, Any] | None) -> dict[str, float]:
    """Raw counts (`take`, `merge_counts`) as the step's tool metrics."""
    if not raw:
        return {}
    calls, failures, seconds, timed, errors = (raw[counter] for counter in _COUNTERS)
    known = list(raw["known"])
    names = [*known, *sorted(set(calls) - set(known))]
    values: dict[str, float] = {}
    for name in names:
        values[tool_key(name, CALLS)] = float(calls.get(name, 0))
        values[tool_key(name, FAILURES)] = float(failures.get(name, 0))
        if timed.get(name):
            values[tool_key(name, LATENCY)] = seconds[name] / timed[name]
    for error in ERROR_CLASSES:
        values[error_key(error)] = float(errors.get(error, 0))
    return values


COLLECTOR = ToolStats()


def record(name: str, seconds: float | None, error: str | None) -> None:
    """COLLECTOR.record that never raises: counting must not break a tool call."""
    try:
        COLLECTOR.record(name, seconds, error)
    except Exception:
        log.exception("counting a call of tool %s failed", name)


def record_failure(name: str, seconds: float | None, exc: BaseException) -> None:
    """A failed call, classified: never raises either."""
    if not COLLECTOR.active:
        return
    try:
        COLLECTOR.record(name, seconds, error_class(exc))
    except Exception:
        log.exception("counting a failed call of tool %s failed", name)
