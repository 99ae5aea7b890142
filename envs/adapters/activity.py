"""What this process's training is doing now: one record the training thread overwrites as it
moves between generation, tool calls, training steps and checkpoint saves, and that the
heartbeat thread reads to say where a stalled run is stuck (worker/training/stall.py).

The writer's cost is one tuple and one attribute store, no lock: the training thread is the
only writer that matters, and a reader on another thread sees either the old tuple or the new
one, never half of one (an attribute store is atomic under the GIL). Nested phases (a tool
call inside a generation) keep the outer record and put it back when they end, so the
generation's start time survives its tool calls.

One record per process, like the tool counts (envs/adapters/toolstats.py). The web process also
calls adapters (the console, probes), from several threads: its record is written and never read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

STARTING = "starting"
GENERATION = "generation"
TOOL_CALL = "tool_call"
RESET = "reset"
TRAINING_STEP = "training_step"
CHECKPOINT_SAVE = "checkpoint_save"

_NAME_LIMIT = 100


class Doing(NamedTuple):
    what: str  # one of the phases above
    since: float  # time.monotonic() when it began
    env: str = ""  # the environment's catalog name (tool calls, resets)
    tool: str = ""  # the tool's name (tool calls)

    def describe(self) -> str:
        """The phase in words: "a tool call to environment 'echo' (tool echo)"."""
        env, tool = self.env[:_NAME_LIMIT], self.tool[:_NAME_LIMIT]
        if self.what == TOOL_CALL:
            return f"a tool call to environment '{env}' (tool {tool})"
        if self.what == RESET:
            return f"a reset of environment '{env}'"
        return _WORDS.get(self.what, self.what)


_WORDS = {
    STARTING: "loading the model and environments",
    GENERATION: "generation",
    TRAINING_STEP: "a training step (forward, backward, optimizer)",
    CHECKPOINT_SAVE: "a checkpoint save",
}


class Activity:
    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now: Doing | None = None

    def enter(self, what: str, env: str = "", tool: str = "") -> Doing | None:
        """Record `what` as begun now; returns the record it replaces, for `leave`."""
        previous = self.now
        self.now = Doing(what, time.monotonic(), env, tool)
        return previous

    def leave(self, previous: Doing | None) -> None:
        self.now = previous

    @contextmanager
    def doing(self, what: str, env: str = "", tool: str = "") -> Iterator[None]:
        previous = self.enter(what, env, tool)
        try:
            yield
        finally:
            self.now = previous


ACTIVITY = Activity()
