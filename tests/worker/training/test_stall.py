"""Stuck, not dead (worker/training/stall.py): the stall watch on a fake clock, and the sink's
heartbeat raising and clearing the alert through the real database."""

from __future__ import annotations

import time
from typing import Any

import pytest

from envs.adapters.activity import GENERATION, TOOL_CALL, Doing
from tests.factories import RunFactory
from webapp.runs.models import RunEvent
from webapp.runs.selectors import run_alerts
from webapp.runs.services import run_claim
from worker.training.stall import StallWatch, duration
from worker.training.telemetry import TelemetrySink


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _observe_later(
    watch: StallWatch, clock: FakeClock, seconds: float, step: int
) -> dict[str, Any] | None:
    """Let `seconds` pass on the fake clock, then have `watch` look at the step counter at `step`."""
    clock.now += seconds
    return watch.observe(step)


def test_a_step_counter_standing_still_past_the_limit_raises_one_alert_naming_the_tool_call_and_clears_on_the_next_step():
    clock = FakeClock()
    doing = {"now": Doing(GENERATION, clock.now)}
    watch = StallWatch(limit_seconds=900, doing=lambda: doing["now"], clock=clock)
    assert watch.observe(5) is None  # the first look: step 5 is where it stands
    clock.now += 60
    doing["now"] = Doing(TOOL_CALL, clock.now, env="echo", tool="echo")
    assert _observe_later(watch, clock, 839, 5) is None  # 899 s: under the limit

    raised = _observe_later(watch, clock, 1, 5)
    again = _observe_later(watch, clock, 600, 5)
    watch_step = _observe_later(watch, clock, 30, 6)
    quiet = _observe_later(watch, clock, 899, 6)

    assert raised == {
        "kind": "stalled", "step": 6, "active": True,
        "message": "stalled for 15 min in a tool call to environment 'echo' (tool echo), in it for 14 min: "
        "step 6 has not ended (ENVLAB_STALL_SECONDS is 900). The heartbeat is alive, so the worker keeps "
        "the run; restarting a stuck environment server ends the call, a cancel takes effect when it returns.",
    }
    assert again is None  # raised once per stall, not every beat
    assert watch_step == {
        "kind": "stalled", "step": 6, "active": False, "message": "training moved again: step 6 ended after 25 min",
    }
    assert quiet is None  # the clock restarted at step 6


def test_a_stall_raised_again_after_a_clear_and_an_end_while_stalled_clears_it():
    clock = FakeClock()
    watch = StallWatch(limit_seconds=10, doing=lambda: None, clock=clock)
    watch.observe(1)
    first = _observe_later(watch, clock, 10, 1)
    cleared = _observe_later(watch, clock, 1, 2)
    second = _observe_later(watch, clock, 10, 2)
    ended = watch.ended(2)

    assert first is not None and first["active"] and first["message"].startswith("stalled for 10 s in an unknown phase: step 2 ")
    assert cleared is not None and not cleared["active"]
    assert second is not None and second["active"] and second["step"] == 3
    assert ended == {"kind": "stalled", "step": 3, "active": False, "message": "training ended while stalled"}
    assert watch.ended(2) is None  # nothing raised any more


def test_no_alert_when_the_watch_is_off_or_training_ends_without_a_stall():
    clock = FakeClock()
    off = StallWatch(limit_seconds=0, doing=lambda: None, clock=clock)
    fine = StallWatch(limit_seconds=10, doing=lambda: None, clock=clock)
    off.observe(1)
    fine.observe(1)
    clock.now += 10_000
    assert off.observe(1) is None
    assert off.ended(1) is None
    clock.now = 1000.0  # `fine` saw nothing past its limit
    assert fine.ended(1) is None


@pytest.mark.parametrize(
    ("seconds", "words"), [(0, "0 s"), (44.6, "45 s"), (119, "119 s"), (120, "2 min"), (7199, "119 min"), (7320, "2 h 2 min")]
)
def test_durations_read_as_people_say_them(seconds, words):
    assert duration(seconds) == words


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_thread_records_the_alert_while_the_training_thread_is_stuck_and_clears_it_when_the_step_moves(owner):
    run = RunFactory(owner=owner, name="r", max_steps=10)
    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="w")
    stuck = Doing(TOOL_CALL, time.monotonic(), env="echo", tool="echo")
    sink = TelemetrySink(
        run_id=run.pk, lease_owner="lease-a", heartbeat_seconds=0.05, publish=False,
        stall=StallWatch(limit_seconds=0.3, doing=lambda: stuck),
    )
    sink.step_done(3)
    deadline = time.monotonic() + 10
    while not RunEvent.objects.filter(run=run, kind="alert").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # this thread is "training": it does nothing, as a stuck one would
    shown = run_alerts(run=run)
    sink.step_done(4)
    deadline = time.monotonic() + 10
    while RunEvent.objects.filter(run=run, kind="alert").count() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sink.close(timeout=10) is True

    [alert] = shown
    assert (alert["kind"], alert["step"], alert["active"]) == ("stalled", 4, True)
    assert alert["message"].startswith("stalled for 0 s in a tool call to environment 'echo' (tool echo), in it for ")
    events = list(RunEvent.objects.filter(run=run, kind="alert").order_by("id").values_list("data", "message"))
    assert [(data["alert"], data["step"], data["active"]) for data, _ in events] == [("stalled", 4, True), ("stalled", 4, False)]
    assert events[1][1].startswith("training moved again: step 4 ended after ")
    assert [a["active"] for a in run_alerts(run=run)] == [False]
