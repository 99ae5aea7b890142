"""The chaos table (`make chaos`, RELIABILITY.md): each fault test of the suite states, in one
row, what it did to a real stack and what the run did, with the store audited from the
database. Rows are appended to the JSON-lines file named by ENVLAB_CHAOS_RECORD when set
(scripts/chaos.py sets it and renders the table); otherwise recording is a no-op and the
test's own assertions are all that matter (tests/support/chaos_record.py)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from tests.support.chaos_record import append_row
from webapp.runs.models import MetricPoint, Rollout, Run


@dataclass
class Audit:
    """What the store holds of a run against what it should: steps 1..max_steps, each with
    `per_step` rollouts, and a metric point per step for `key`."""

    status: str
    steps_stored: int
    steps_missing: int
    steps_duplicated: int
    rollouts_duplicated: int
    episodes_lost: int


def audit(run_id: int, *, max_steps: int, per_step: int, key: str = "reward") -> Audit:
    expected = set(range(1, max_steps + 1))
    metric = Counter(MetricPoint.objects.filter(run_id=run_id, key=key).values_list("step", flat=True))
    rollouts = Counter(Rollout.objects.filter(run_id=run_id).values_list("step", flat=True))
    stored = set(metric) & set(rollouts) if per_step else set(metric)
    seqs = list(Rollout.objects.filter(run_id=run_id).values_list("seq", flat=True))
    return Audit(
        status=Run.objects.values_list("status", flat=True).get(pk=run_id),
        steps_stored=len(stored & expected),
        steps_missing=len(expected - stored),
        steps_duplicated=sum(n - 1 for n in metric.values() if n > 1),
        rollouts_duplicated=sum(max(0, n - per_step) for n in rollouts.values()) + len(seqs) - len(set(seqs)),
        episodes_lost=Rollout.objects.filter(run_id=run_id, unscored=True).count(),
    )


@dataclass
class ChaosRow:
    fault: str
    when: str
    outcome: str  # what the run did
    recover_seconds: float | None  # fault over (or the kill) -> training moving again
    audit: Audit
    test: str = ""
    note: str = ""
    recorded_at: float = field(default_factory=time.time)


def seconds_until_progress(run_id: int, past_step: int, timeout: float = 600) -> float:
    """Seconds from now until the run stores a step after `past_step` (or ends)."""
    started = time.monotonic()
    deadline = started + timeout
    while time.monotonic() < deadline:
        step, status = Run.objects.values_list("step", "status").get(pk=run_id)
        if step > past_step or status not in ("queued", "running"):
            return round(time.monotonic() - started, 1)
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} made no progress past step {past_step} in {timeout:g} s")


class ChaosRecorder:
    def __init__(self, test: str) -> None:
        self.test = test

    def __call__(
        self, *, fault: str, when: str, outcome: str, recover_seconds: float | None, run_id: int,
        max_steps: int, per_step: int, note: str = "", key: str = "reward",
    ) -> ChaosRow:
        row = ChaosRow(
            fault=fault, when=when, outcome=outcome, recover_seconds=recover_seconds,
            audit=audit(run_id, max_steps=max_steps, per_step=per_step, key=key), test=self.test, note=note,
        )
        append_row(asdict(row))
        return row
