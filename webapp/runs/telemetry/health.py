"""Run health: rules over the metrics TRL already logs each step.

Pure and cheap (a few comparisons per step, no I/O): the training callback feeds it each
step's `logs` dict and the captured rollouts, and records what it returns as run events
through the telemetry sink. An alert is raised once when its rule starts holding and
cleared once when it stops holding. For an external run (webapp/runs/external.py) the web
process replays the rules over the run's last logged steps at each log.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from envs.adapters.tool_metrics import tool_call_names, tool_results
from webapp.runs.config import AlertSettings
from webapp.runs.telemetry.group_starts import GroupStarts


@dataclass(frozen=True)
class Alert:
    kind: str
    step: int
    message: str
    active: bool

    def as_event(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step, "message": self.message, "active": self.active}


def _number(logs: dict[str, Any], key: str) -> float | None:
    value = logs.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


class HealthMonitor:
    """Feed `tool_results` with each generation batch's rollouts, `group_starts` with its
    groups' starts (webapp/runs/telemetry/group_starts.py) and `observe` with each step's logs; `observe`
    returns the alerts raised or cleared at that step. `stop` is the first raised alert whose
    kind the run's `stop_on` names."""

    def __init__(self, settings: AlertSettings, *, tool_env: bool = True) -> None:
        self.settings = settings
        self.tool_env = tool_env
        self.active: dict[str, Alert] = {}
        self.stop: Alert | None = None
        self._streaks: Counter[str] = Counter()
        self._rewards: deque[float] = deque(maxlen=settings.reward_flat_steps)
        # Per tool, over the steps of the current failure streak: calls, failures, errors.
        self._tool_calls: Counter[str] = Counter()
        self._tool_failures: Counter[str] = Counter()
        self._tool_errors: dict[str, Counter[str]] = {}
        self._step_calls: Counter[str] = Counter()
        self._step_failures: Counter[str] = Counter()
        self._step_errors: dict[str, Counter[str]] = {}
        self._step_starts: GroupStarts | None = None
        self._steps_without_mismatch = 0

    # --- inputs ---------------------------------------------------------------------------

    def tool_results(self, rollouts: list[dict[str, Any]]) -> None:
        """Count calls per tool from the transcripts' tool calls, failures and errors from
        their tool results (TRL drops a result that would overrun max_completion_length, so
        a failure may show only in its aggregate `tools/failure_frequency`)."""
        for row in rollouts:
            messages = row.get("messages")
            for called in tool_call_names(messages):
                self._step_calls[called[:64]] += 1
            for result in tool_results(messages):
                if result.error is not None:
                    name = result.name[:64]
                    self._step_failures[name] += 1
                    self._step_errors.setdefault(name, Counter())[result.error[:200]] += 1

    def group_starts(self, starts: GroupStarts) -> None:
        """The step's groups, and which of them started from different observations."""
        if self._step_starts is None:
            self._step_starts = GroupStarts()
        self._step_starts.add(starts)

    def observe(self, step: int, logs: dict[str, Any]) -> list[Alert]:
        if not self.settings.enabled:
            return []
        s = self.settings
        changes: list[Alert] = []

        loss, grad_norm = _number(logs, "loss"), _number(logs, "grad_norm")
        bad = [f"{name} is {value}" for name, value in (("loss", loss), ("grad_norm", grad_norm))
               if value is not None and not math.isfinite(value)]
        changes += self._rule(
            "nonfinite", step, bool(bad), 1,
            lambda: f"{' and '.join(bad)} at step {step}: the update diverged; the weights after it are not usable.",
        )

        zero_std = _finite(_number(logs, "frac_reward_zero_std"))
        if zero_std is not None:
            changes += self._rule(
                "zero_variance", step, zero_std >= s.zero_variance_frac, s.zero_variance_steps,
                lambda: (
                    f"{zero_std:.0%} of groups had the same reward for every completion over the last "
                    f"{s.zero_variance_steps} steps: these groups teach nothing; make the task easier or "
                    "harder, add a graded reward term, or raise num_generations."
                ),
            )

        calls = _finite(_number(logs, "tools/call_frequency"))
        failures = _finite(_number(logs, "tools/failure_frequency"))
        self._merge_async_tool_metrics(logs)
        if self.tool_env and calls is not None:
            changes += self._rule(
                "no_tool_calls", step, calls == 0, s.no_tool_calls_steps,
                lambda: (
                    f"no tool calls in the last {s.no_tool_calls_steps} steps, in an environment that only "
                    "scores through its tools: check the prompt and the chat template, or warm the model up."
                ),
            )
        if calls is not None and failures is not None:
            failing = calls > 0 and failures >= s.tool_failure_rate
            if failing:
                self._tool_calls.update(self._step_calls)
                self._tool_failures.update(self._step_failures)
                for name, errors in self._step_errors.items():
                    self._tool_errors.setdefault(name, Counter()).update(errors)
            changes += self._rule(
                "tool_failures", step, failing, s.tool_failure_steps,
                lambda: self._tool_failure_message(failures),
            )
            if not failing:
                self._tool_calls.clear()
                self._tool_failures.clear()
                self._tool_errors.clear()
        self._step_calls.clear()
        self._step_failures.clear()
        self._step_errors.clear()

        reward = _finite(_number(logs, "reward"))
        if reward is not None:
            self._rewards.append(reward)
            flat = (
                len(self._rewards) == s.reward_flat_steps
                and max(self._rewards) - min(self._rewards) <= s.reward_flat_tolerance
            )
            changes += self._rule(
                "reward_flat", step, flat, 1,
                lambda: (
                    f"the mean reward stayed at {reward:.4g} (within {s.reward_flat_tolerance:g}) for "
                    f"{s.reward_flat_steps} steps: the run is not learning."
                ),
            )

        entropy = _finite(_number(logs, "entropy"))
        if entropy is not None:
            changes += self._rule(
                "entropy_collapse", step, entropy < s.entropy_min, s.entropy_steps,
                lambda: (
                    f"token entropy fell to {entropy:.3g} (below {s.entropy_min:g}) for {s.entropy_steps} "
                    "steps: the policy has collapsed onto a few outputs."
                ),
            )

        changes += self._group_mismatch_rule(step)

        for alert in changes:
            if alert.active and self.stop is None and alert.kind in s.stop_on:
                self.stop = alert
        return changes

    # --- rules ----------------------------------------------------------------------------

    def _rule(self, kind: str, step: int, holds: bool, steps: int, message: Any) -> list[Alert]:
        """Raise `kind` once it has held `steps` steps in a row; clear it the first step it doesn't."""
        if holds:
            self._streaks[kind] += 1
            if kind not in self.active and self._streaks[kind] >= steps:
                alert = Alert(kind=kind, step=step, message=message(), active=True)
                self.active[kind] = alert
                return [alert]
            return []
        self._streaks[kind] = 0
        raised = self.active.pop(kind, None)
        if raised is None:
            return []
        return [Alert(kind=kind, step=step, message=f"cleared at step {step}: {raised.message}", active=False)]

    def _group_mismatch_rule(self, step: int) -> list[Alert]:
        """Raised at the first step with a group whose completions started from different
        observations: by chance a few groups match, so one clean step proves nothing; cleared
        after `group_mismatch_clear_steps` steps in a row without one. A step without checked
        groups (no rollouts generated, or no fingerprints) changes nothing."""
        starts, self._step_starts = self._step_starts, None
        if starts is None or not starts.checked_total:
            return []
        mismatched = starts.mismatched_total > 0
        self._steps_without_mismatch = 0 if mismatched else self._steps_without_mismatch + 1
        holds = mismatched or (
            "group_mismatch" in self.active
            and self._steps_without_mismatch < self.settings.group_mismatch_clear_steps
        )
        return self._rule("group_mismatch", step, holds, 1, lambda: group_mismatch_message(step, starts))

    def _merge_async_tool_metrics(self, logs: dict[str, Any]) -> None:
        """The async trainer's per-tool totals (`tools/<name>/call_total|failure_total`)."""
        for key in logs:
            if not (isinstance(key, str) and key.startswith("tools/") and key.endswith("/call_total")):
                continue
            name = key[len("tools/"):-len("/call_total")]
            if "/" in name or name in self._step_calls:
                continue
            failed = _finite(_number(logs, f"tools/{name}/failure_total"))
            total = _finite(_number(logs, key))
            if total:
                self._step_calls[name] += int(total)
                self._step_failures[name] += int(failed or 0)

    def _tool_failure_message(self, rate: float) -> str:
        steps = self.settings.tool_failure_steps
        head = f"{rate:.0%} of tool calls failed at each of the last {steps} steps"
        if not self._tool_failures:
            if not self._tool_calls:
                return head + "."
            name, calls = self._tool_calls.most_common(1)[0]
            return f"{head}; the tool called most is '{name}' ({calls} calls)."
        name, failed = self._tool_failures.most_common(1)[0]
        text = f"{head}; most failures in '{name}' ({failed} of {self._tool_calls[name]} calls)"
        errors = self._tool_errors.get(name)
        if errors:
            error, count = errors.most_common(1)[0]
            text += f", most often: {error} ({count}x)"
        return text + "."


def group_mismatch_message(step: int, starts: GroupStarts) -> str:
    envs = sorted(env for env, count in starts.mismatched.items() if count)
    fix = "fix the start with the environment's reset options, or make the server's reset honour the seed"
    if len(envs) == 1:
        env = envs[0]
        return (
            f"environment '{env}': its reset ignores the seed: GRPO's advantages compare different starts "
            f"({starts.mismatched[env]} of {starts.checked[env]} groups at step {step} started from different "
            f"observations); {fix}."
        )
    names = _and([f"'{env}'" for env in envs])
    counts = _and([f"{starts.mismatched[env]} of {starts.checked[env]} groups of '{env}'" for env in envs])
    return (
        f"environments {names}: their resets ignore the seed: GRPO's advantages compare different starts "
        f"(at step {step}, {counts} started from different observations); {fix}."
    )


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
