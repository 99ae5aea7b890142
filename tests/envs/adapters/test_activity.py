"""The activity record (envs/adapters/activity.py): every tool call and reset through the
adapters' wrapper names itself while it runs and puts back what was there when it ends."""

from __future__ import annotations

import time
import timeit

import pytest

from envs.adapters.activity import ACTIVITY, GENERATION, RESET, TOOL_CALL, Activity
from envs.adapters.base import ClipsToolText


class Recording(ClipsToolText):
    catalog_name = "echo-main"
    env_name = "echo"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def reset(self, **row: object) -> str:
        self._note()
        return "start"

    def echo(self, message: str) -> str:
        self._note()
        if message == "boom":
            raise RuntimeError("the server said no")
        return message

    def _note(self) -> None:
        now = ACTIVITY.now
        assert now is not None
        self.seen.append((now.what, now.env, now.tool))


def test_a_tool_call_and_a_reset_name_themselves_while_they_run_and_the_generation_comes_back_after():
    adapter = Recording()
    with ACTIVITY.doing(GENERATION):
        outer = ACTIVITY.now
        adapter.reset()
        adapter.echo(message="hi")
        with pytest.raises(RuntimeError):
            adapter.echo(message="boom")
        after = ACTIVITY.now
    assert adapter.seen == [(RESET, "echo-main", ""), (TOOL_CALL, "echo-main", "echo"), (TOOL_CALL, "echo-main", "echo")]
    assert after is outer  # the generation's own record, with its start time, also after a failed call
    assert outer is not None and outer.describe() == "generation"


def test_descriptions_name_the_environment_and_tool():
    record = Activity()
    record.enter(TOOL_CALL, "wordle", "guess")
    assert record.now is not None and record.now.describe() == "a tool call to environment 'wordle' (tool guess)"
    record.enter(RESET, "wordle")
    assert record.now is not None and record.now.describe() == "a reset of environment 'wordle'"


def test_the_hot_path_costs_well_under_a_tool_calls_own_overhead():
    # One enter and leave, as a tool call pays: measured, and held to a generous bound (a tool
    # call over a socket costs hundreds of microseconds; this must stay far below).
    record = Activity()

    def one() -> None:
        previous = record.enter(TOOL_CALL, "echo", "echo")
        record.leave(previous)

    runs = 100_000
    seconds = min(timeit.repeat(one, number=runs, repeat=3, timer=time.perf_counter)) / runs
    print(f"\nactivity enter+leave: {seconds * 1e9:.0f} ns")
    assert seconds < 5e-6
