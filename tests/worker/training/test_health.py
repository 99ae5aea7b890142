"""Run health rules (webapp/runs/telemetry/health.py): fed step logs, they raise and clear alerts."""

from __future__ import annotations

from collections import Counter

import pytest

from webapp.runs.config import AlertSettings, RunConfigError, parse_run_config
from webapp.runs.telemetry.group_starts import GroupStarts
from webapp.runs.telemetry.health import Alert, HealthMonitor

HEALTHY = {
    "loss": 0.1, "grad_norm": 1.0, "reward": 0.5, "frac_reward_zero_std": 0.0,
    "tools/call_frequency": 1.0, "tools/failure_frequency": 0.0, "entropy": 1.2,
}


def step(**changes: float) -> dict[str, float]:
    return {**HEALTHY, **changes}


def failing_rollouts(tool: str, error: str, n: int = 4) -> list[dict]:
    return [{
        "messages": [
            {"role": "assistant", "tool_calls": [{"function": {"name": tool}}]},
            {"role": "tool", "name": tool, "content": str({"error": error})},
        ]
    } for _ in range(n)]


def test_healthy_steps_raise_nothing():
    monitor = HealthMonitor(AlertSettings())
    assert [monitor.observe(s, step(reward=0.1 * s)) for s in range(1, 30)] == [[]] * 29
    assert (monitor.active, monitor.stop) == ({}, None)


def test_zero_variance_after_five_steps_then_cleared():
    monitor = HealthMonitor(AlertSettings())
    seen = [monitor.observe(s, step(frac_reward_zero_std=0.9, reward=0.1 * s)) for s in range(1, 6)]
    assert seen[:4] == [[]] * 4
    message = (
        "90% of groups had the same reward for every completion over the last 5 steps: these groups "
        "teach nothing; make the task easier or harder, add a graded reward term, or raise num_generations."
    )
    assert seen[4] == [Alert(kind="zero_variance", step=5, message=message, active=True)]
    assert monitor.observe(6, step(frac_reward_zero_std=1.0, reward=0.7)) == []
    assert monitor.observe(7, step(frac_reward_zero_std=0.5, reward=0.8)) == [
        Alert(kind="zero_variance", step=7, message=f"cleared at step 7: {message}", active=False)
    ]
    assert monitor.stop is None


def test_zero_variance_streak_restarts_after_a_good_step():
    monitor = HealthMonitor(AlertSettings(zero_variance_steps=2))
    assert monitor.observe(1, step(frac_reward_zero_std=1.0)) == []
    assert monitor.observe(2, step(frac_reward_zero_std=0.89, reward=0.6)) == []
    assert monitor.observe(3, step(frac_reward_zero_std=1.0, reward=0.7)) == []
    assert [a.kind for a in monitor.observe(4, step(frac_reward_zero_std=1.0, reward=0.8))] == ["zero_variance"]


def test_tool_failures_name_the_tool_and_its_commonest_error():
    monitor = HealthMonitor(AlertSettings())
    raised = []
    for s in (1, 2, 3):
        monitor.tool_results(failing_rollouts("echo", "Connection refused", 3) + failing_rollouts("echo", "timeout", 1))
        raised += monitor.observe(s, step(**{"tools/failure_frequency": 0.5}, reward=0.1 * s))
    assert raised == [Alert(
        kind="tool_failures", step=3, active=True,
        message=(
            "50% of tool calls failed at each of the last 3 steps; most failures in 'echo' (12 of 12 calls), "
            "most often: Connection refused (9x)."
        ),
    )]


def test_tool_failures_without_results_name_the_most_called_tool():
    monitor = HealthMonitor(AlertSettings(tool_failure_steps=1))
    calls = [{"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "echo"}}]}]}] * 4
    monitor.tool_results(calls)
    assert monitor.observe(1, step(**{"tools/failure_frequency": 1.0})) == [Alert(
        kind="tool_failures", step=1, active=True,
        message="100% of tool calls failed at each of the last 1 steps; the tool called most is 'echo' (4 calls).",
    )]


def test_tool_failures_below_the_rate_raise_nothing():
    monitor = HealthMonitor(AlertSettings())
    for s in (1, 2, 3, 4):
        monitor.tool_results(failing_rollouts("echo", "boom"))
        assert monitor.observe(s, step(**{"tools/failure_frequency": 0.49}, reward=0.1 * s)) == []


def test_tool_failures_from_the_async_trainers_per_tool_totals():
    monitor = HealthMonitor(AlertSettings(tool_failure_steps=1))
    logs = step(**{
        "tools/failure_frequency": 1.0, "tools/search/call_total": 6.0, "tools/search/failure_total": 6.0,
    })
    assert monitor.observe(1, logs) == [Alert(
        kind="tool_failures", step=1, active=True,
        message="100% of tool calls failed at each of the last 1 steps; most failures in 'search' (6 of 6 calls).",
    )]


def test_no_tool_calls_only_in_a_tool_environment():
    logs = step(**{"tools/call_frequency": 0.0, "tools/failure_frequency": 0.0})
    with_tools = HealthMonitor(AlertSettings(no_tool_calls_steps=2))
    without = HealthMonitor(AlertSettings(no_tool_calls_steps=2), tool_env=False)
    assert with_tools.observe(1, logs) == []
    assert [a.kind for a in with_tools.observe(2, {**logs, "reward": 0.6})] == ["no_tool_calls"]
    assert without.observe(1, logs) == [] and without.observe(2, {**logs, "reward": 0.6}) == []


@pytest.mark.parametrize(("key", "value", "shown"), [
    ("loss", float("nan"), "loss is nan"),
    ("grad_norm", float("inf"), "grad_norm is inf"),
])
def test_nonfinite_loss_stops_by_default(key, value, shown):
    monitor = HealthMonitor(AlertSettings())
    alert = Alert(
        kind="nonfinite", step=4, active=True,
        message=f"{shown} at step 4: the update diverged; the weights after it are not usable.",
    )
    assert monitor.observe(4, step(**{key: value})) == [alert]
    assert monitor.stop == alert


def test_stop_on_is_configurable():
    monitor = HealthMonitor(AlertSettings(stop_on=["zero_variance"], zero_variance_steps=1))
    assert [a.kind for a in monitor.observe(1, step(loss=float("nan")))] == ["nonfinite"]
    assert monitor.stop is None
    changes = monitor.observe(2, step(frac_reward_zero_std=1.0))
    assert [(a.kind, a.active) for a in changes] == [("nonfinite", False), ("zero_variance", True)]
    assert monitor.stop is not None and monitor.stop.kind == "zero_variance"


def test_reward_flat_for_n_steps():
    monitor = HealthMonitor(AlertSettings(reward_flat_steps=3, reward_flat_tolerance=0.01))
    assert monitor.observe(1, step(reward=0.25)) == []
    assert monitor.observe(2, step(reward=0.255)) == []
    assert monitor.observe(3, step(reward=0.259)) == [Alert(
        kind="reward_flat", step=3, active=True,
        message="the mean reward stayed at 0.259 (within 0.01) for 3 steps: the run is not learning.",
    )]
    assert [a.active for a in monitor.observe(4, step(reward=0.4))] == [False]


def test_entropy_collapse():
    monitor = HealthMonitor(AlertSettings(entropy_steps=2))
    assert monitor.observe(1, step(entropy=0.001)) == []
    assert [a.kind for a in monitor.observe(2, step(entropy=0.002, reward=0.6))] == ["entropy_collapse"]


def test_disabled_raises_nothing():
    monitor = HealthMonitor(AlertSettings(enabled=False))
    assert monitor.observe(1, step(loss=float("nan"))) == []


def test_config_defaults_and_bounds():
    base = {"name": "r", "model": "demo:echo", "environments": [{"environment": 1}]}
    assert parse_run_config(base).alerts == AlertSettings()
    assert AlertSettings().stop_on == ["nonfinite"]
    with pytest.raises(RunConfigError) as refused:
        parse_run_config({**base, "alerts": {"zero_variance_frac": 1.5, "stop_on": ["bogus"], "typo": 1}})
    assert set(refused.value.errors) == {"alerts.zero_variance_frac", "alerts.stop_on.0", "alerts.typo"}


def starts(checked: dict[str, int], mismatched: dict[str, int]) -> GroupStarts:
    return GroupStarts(checked=Counter(checked), mismatched=Counter(mismatched))


CHESS_MESSAGE = (
    "environment 'chess': its reset ignores the seed: GRPO's advantages compare different starts (3 of 4 groups "
    "at step 2 started from different observations); fix the start with the environment's reset options, or make "
    "the server's reset honour the seed."
)


def test_group_mismatch_is_raised_at_the_first_step_with_one_naming_the_environment():
    monitor = HealthMonitor(AlertSettings())
    monitor.group_starts(starts({"chess": 4}, {}))
    assert monitor.observe(1, step(reward=0.1)) == []

    monitor.group_starts(starts({"chess": 2}, {"chess": 1}))
    monitor.group_starts(starts({"chess": 2}, {"chess": 2}))  # a second generation batch of the step
    raised = monitor.observe(2, step(reward=0.2))

    assert raised == [Alert(kind="group_mismatch", step=2, message=CHESS_MESSAGE, active=True)]
    assert monitor.stop is None


def test_group_mismatch_stays_through_chance_matches_and_clears_after_the_clean_steps():
    monitor = HealthMonitor(AlertSettings(group_mismatch_clear_steps=3))
    monitor.group_starts(starts({"chess": 4}, {"chess": 3}))
    assert [a.kind for a in monitor.observe(2, step(reward=0.2))] == ["group_mismatch"]
    seen = []
    for s, groups in ((3, {}), (4, {}), (5, {"chess": 1}), (6, {}), (7, {}), (8, {})):
        monitor.group_starts(starts({"chess": 4}, groups))
        seen.append(monitor.observe(s, step(reward=0.1 * s)))
    # A step that generated nothing (no starts fed) neither counts as clean nor clears.
    seen.append(monitor.observe(9, step(reward=0.9)))

    assert seen[:5] == [[]] * 5
    assert seen[5] == [Alert(kind="group_mismatch", step=8, message=f"cleared at step 8: {CHESS_MESSAGE}", active=False)]
    assert seen[6] == [] and monitor.active == {}


def test_group_mismatch_in_a_run_of_several_environments_names_those_whose_groups_mismatch():
    monitor = HealthMonitor(AlertSettings())
    monitor.group_starts(starts({"finqa": 2, "chess": 4, "echo": 2}, {"finqa": 2, "chess": 1}))

    [alert] = monitor.observe(5, step())

    assert alert.message == (
        "environments 'chess' and 'finqa': their resets ignore the seed: GRPO's advantages compare different "
        "starts (at step 5, 1 of 4 groups of 'chess' and 2 of 2 groups of 'finqa' started from different "
        "observations); fix the start with the environment's reset options, or make the server's reset honour "
        "the seed."
    )


def test_group_mismatch_without_checked_groups_raises_nothing_and_may_stop_the_run():
    quiet = HealthMonitor(AlertSettings())
    quiet.group_starts(starts({}, {}))
    assert quiet.observe(1, step()) == []

    stopping = HealthMonitor(parse_run_config({
        "name": "r", "model": "demo:echo", "environments": [{"environment": 1}],
        "alerts": {"stop_on": ["group_mismatch"]},
    }).alerts)
    stopping.group_starts(starts({"chess": 1}, {"chess": 1}))
    [alert] = stopping.observe(1, step())
    assert stopping.stop == alert and alert.kind == "group_mismatch"
    assert AlertSettings().group_mismatch_clear_steps == 10
