"""Whether the completions of each GRPO group started from the same observation.

GRPO's advantage compares the rewards within a group (the num_generations completions of one
dataset row) as if every completion started from the same state. A server whose reset ignores
the seed (OpenEnv's chess picks the agent's colour from a uuid, finqa a random question) puts
different starts in one group, and the advantages then reward the luckier start, not the better
completion. Each rollout carries a fingerprint of its first observation (`reset_fingerprint`,
envs/adapters/base.py); this counts the groups whose fingerprints differ.

Groups are TRL's own: consecutive runs of num_generations rollouts of the whole (gathered)
generation batch, as GRPOTrainer normalises `rewards.view(-1, num_generations)`. Not the stored
`prompt_key`: TRL's logged prompt holds the reset text, so one group of a server that ignores
the seed has as many prompt keys as completions. Pure and cheap: a few set operations a batch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

METRIC = "group_mismatch"
FRACTION_METRIC = "group_mismatch_frac"


@dataclass
class GroupStarts:
    """Per environment: the groups checked (two or more fingerprinted rollouts) and, of those,
    the groups whose rollouts started from different observations."""

    checked: Counter[str] = field(default_factory=Counter)
    mismatched: Counter[str] = field(default_factory=Counter)

    def add(self, other: GroupStarts) -> None:
        self.checked.update(other.checked)
        self.mismatched.update(other.mismatched)

    @property
    def checked_total(self) -> int:
        return sum(self.checked.values())

    @property
    def mismatched_total(self) -> int:
        return sum(self.mismatched.values())

    def metrics(self) -> dict[str, float]:
        """The step's metrics; none when no group could be checked (no fingerprints)."""
        if not self.checked_total:
            return {}
        return {
            METRIC: float(self.mismatched_total),
            FRACTION_METRIC: self.mismatched_total / self.checked_total,
        }


def group_starts(rows: list[dict[str, Any]], num_generations: int) -> GroupStarts:
    """The groups of one generation batch's rollouts (in TRL's order) and their mismatches.
    A rollout without a fingerprint (an adapter that records none) is left out of its group."""
    starts = GroupStarts()
    if num_generations < 2 or len(rows) % num_generations:
        return starts  # not TRL's grouping: nothing to compare
    for first in range(0, len(rows), num_generations):
        group = rows[first:first + num_generations]
        prints = [row.get("reset_fingerprint") for row in group]
        known = {p for p in prints if isinstance(p, str)}
        if sum(isinstance(p, str) for p in prints) < 2:
            continue
        env = str(group[0].get("env") or "")
        starts.checked[env] += 1
        if len(known) > 1:
            starts.mismatched[env] += 1
    return starts


class GroupStartMeter:
    """The groups of the generation batches since the last take (a step's, usually one batch)."""

    def __init__(self) -> None:
        self._starts: GroupStarts | None = None

    def add(self, starts: GroupStarts) -> None:
        if self._starts is None:
            self._starts = GroupStarts()
        self._starts.add(starts)

    def take(self) -> GroupStarts | None:
        starts, self._starts = self._starts, None
        return starts
