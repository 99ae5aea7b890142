"""Reads for the prompt-pinned timeline: a run's training prompts with the steps each was
trained at, and one prompt's GRPO groups at chosen steps side by side.

A prompt is identified by its rollouts' `prompt_key` (webapp.runs.models.prompt_key: env,
prompt messages and row seed). A GRPO group is the rollouts of one prompt at one step; a
dataset row comes back at later steps when the dataset is cycled, so a prompt appears at
several steps. Rollouts stored before prompt tracking have the key "": they are counted
(`untracked`) and never listed as a prompt.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from django.db.models import Avg, Count, Max, Min, QuerySet

from webapp.runs.models import Rollout, Run

# Columns the timeline shows when the caller chooses none: every step up to this many,
# else this many evenly spaced ones (first and last included).
DEFAULT_COLUMNS = 8
# Columns a caller may choose with `steps=`: each is up to MAX_GROUP_ROLLOUTS transcripts.
MAX_CHOSEN_STEPS = 16
# One column's rollouts: a group is num_generations (at most 64, webapp.runs.config) of
# them; more come only from a row repeated within one batch or a step re-run after a resume.
MAX_GROUP_ROLLOUTS = 64
# The trained steps the timeline lists for its picker; a prompt trained at more steps has
# them evenly thinned to this many (first and last kept). `trained_step_count` says how many.
MAX_LISTED_STEPS = 1000
MAX_STEP = 10**9
MAX_STEPS_PARAM_CHARS = 400

PROMPT_ORDERS: dict[str, tuple[str, ...]] = {
    "most_steps": ("-steps", "first_step", "prompt_key"),
    "fewest_steps": ("steps", "first_step", "prompt_key"),
    "first_step": ("first_step", "prompt_key"),
}
DEFAULT_PROMPT_ORDER = "most_steps"

_KEY = re.compile(r"[0-9a-f]{32}")


class PromptStepsError(ValueError):
    """`steps=` is not a list of step numbers this page can show."""


def prompt_steps_parse(raw: str | None) -> list[int] | None:
    """`"1,5, 9"` -> [1, 5, 9] (sorted, repeats dropped); absent or blank -> None (the default
    columns). Refused with a message saying what to fix: anything but whole numbers from 0
    to MAX_STEP separated by commas, or more than MAX_CHOSEN_STEPS of them."""
    if raw is None or not raw.strip():
        return None
    if len(raw) > MAX_STEPS_PARAM_CHARS:
        raise PromptStepsError(
            f"steps is {len(raw)} characters long; give at most {MAX_CHOSEN_STEPS} step numbers "
            f"separated by commas (at most {MAX_STEPS_PARAM_CHARS} characters)"
        )
    steps: set[int] = set()
    for part in raw.split(","):
        item = part.strip()
        if not item:
            raise PromptStepsError(
                "steps has an empty item (a comma too many); give step numbers separated by commas, like 1,5,9"
            )
        if not (item.isascii() and item.isdigit()):
            raise PromptStepsError(
                f"steps must be whole step numbers separated by commas, like 1,5,9; got {item[:20]!r}"
            )
        step = int(item)
        if step > MAX_STEP:
            raise PromptStepsError(f"step {item[:20]} is past the largest step number, {MAX_STEP}")
        steps.add(step)
    if len(steps) > MAX_CHOSEN_STEPS:
        raise PromptStepsError(f"steps names {len(steps)} steps; choose at most {MAX_CHOSEN_STEPS}")
    return sorted(steps)


def evenly_spaced(values: list[int], count: int) -> list[int]:
    """`count` of the sorted `values` at evenly spaced positions, the first and the last
    always among them; all of them when there are no more than `count`."""
    if len(values) <= count:
        return list(values)
    if count == 1:
        return [values[-1]]
    stride = (len(values) - 1) / (count - 1)
    return [values[round(i * stride)] for i in range(count)]


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _tracked(run: Run) -> QuerySet[Rollout]:
    return Rollout.objects.filter(run=run).exclude(prompt_key="")


@dataclass(frozen=True)
class PromptPage:
    """One page of a run's prompts, `results` as `run_prompts` describes them."""

    count: int
    untracked: int
    results: list[dict[str, Any]]


def run_prompts(
    *, run: Run, order: str = DEFAULT_PROMPT_ORDER, offset: int = 0, limit: int = 50
) -> PromptPage:
    """The run's training prompts, `limit` of them from `offset` in `order` (PROMPT_ORDERS;
    "most_steps": the most repeated first): each `{prompt_key, env, seed, prompt, steps,
    rollouts, first_step, last_step, reward_mean}`, where `steps` counts the distinct steps
    it was trained at, `rollouts` its rollouts and `reward_mean` their mean total reward
    (None when none was scored). `count`: the run's prompts; `untracked`: rollouts stored
    before prompt tracking, in no prompt."""
    if order not in PROMPT_ORDERS:
        raise ValueError(f"order must be one of {', '.join(PROMPT_ORDERS)}")
    grouped = (
        _tracked(run)
        .values("prompt_key")
        .annotate(
            steps=Count("step", distinct=True),
            rollouts=Count("id"),
            first_step=Min("step"),
            last_step=Max("step"),
            reward_mean=Avg("reward"),
            first_seq=Min("seq"),
        )
        .order_by(*PROMPT_ORDERS[order])
    )
    rows = list(grouped[offset:offset + limit])
    # The prompt itself, its env and seed: read from each prompt's first rollout, by the
    # (run, seq) unique index, for this page's prompts only.
    firsts = {
        r.prompt_key: r
        for r in Rollout.objects.filter(run=run, seq__in=[row["first_seq"] for row in rows]).only(
            "prompt_key", "env", "seed", "prompt"
        )
    }
    results = []
    for row in rows:
        first = firsts.get(row["prompt_key"])
        results.append({
            "prompt_key": row["prompt_key"],
            "env": first.env if first is not None else "",
            "seed": first.seed if first is not None else None,
            "prompt": first.prompt if first is not None else [],
            "steps": row["steps"],
            "rollouts": row["rollouts"],
            "first_step": row["first_step"],
            "last_step": row["last_step"],
            "reward_mean": _finite(row["reward_mean"]),
        })
    return PromptPage(
        count=_tracked(run).values("prompt_key").distinct().count(),
        untracked=run_untracked_rollouts(run=run),
        results=results,
    )


def run_untracked_rollouts(*, run: Run) -> int:
    """Rollouts stored before prompt tracking (prompt_key ""): in no prompt's timeline."""
    return Rollout.objects.filter(run=run, prompt_key="").count()


def _group(rollouts: list[Rollout], *, step: int, total: int) -> dict[str, Any]:
    rewards = [r for r in (_finite(row.reward) for row in rollouts) if r is not None]
    mean = sum(rewards) / len(rewards) if rewards else None
    # The sample standard deviation (n - 1), as TRL's GRPO scales advantages by.
    std = (
        math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
        if mean is not None and len(rewards) > 1
        else None
    )
    return {
        "step": step,
        "rollout_count": total,
        "reward_mean": mean,
        "reward_std": std,
        "rollouts": rollouts,
    }


def run_prompt_timeline(*, run: Run, key: str, steps: list[int] | None = None) -> dict[str, Any] | None:
    """One prompt's groups side by side: `{prompt_key, env, seed, prompt, trained_step_count,
    trained_steps, default_steps, chosen, steps: [{step, rollout_count, reward_mean,
    reward_std, rollouts}]}`, one entry per chosen step (`steps`, or `default_steps`: every
    step it was trained at up to DEFAULT_COLUMNS, else that many evenly spaced). A column's
    `rollouts` are Rollout rows by seq, at most MAX_GROUP_ROLLOUTS (`rollout_count`: all of
    them); a chosen step it was not trained at is a column with none. `reward_std`: the
    sample deviation of the group's scored totals. None: the run has no such prompt."""
    if not _KEY.fullmatch(key):
        return None
    of_key = Rollout.objects.filter(run=run, prompt_key=key)
    first = of_key.order_by("seq").only("env", "seed", "prompt").first()
    if first is None:
        return None
    trained = list(of_key.order_by("step").values_list("step", flat=True).distinct())
    default_steps = evenly_spaced(trained, DEFAULT_COLUMNS)
    chosen = default_steps if steps is None else steps
    counts = dict(
        of_key.filter(step__in=chosen).values("step").annotate(n=Count("id")).values_list("step", "n")
    )
    columns = []
    for step in chosen:
        rows = list(of_key.filter(step=step).order_by("seq")[:MAX_GROUP_ROLLOUTS]) if counts.get(step) else []
        columns.append(_group(rows, step=step, total=counts.get(step, 0)))
    return {
        "prompt_key": key,
        "env": first.env,
        "seed": first.seed,
        "prompt": first.prompt,
        "trained_step_count": len(trained),
        "trained_steps": evenly_spaced(trained, MAX_LISTED_STEPS),
        "default_steps": default_steps,
        "chosen": steps is not None,
        "steps": columns,
    }
