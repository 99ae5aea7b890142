"""The run's phase (warm-up, then GRPO) and the rewind that keeps a finished warm-up's metrics."""

from __future__ import annotations

import pytest

from tests.factories import RunFactory
from webapp.runs.models import MetricPoint, Run, RunEvent
from webapp.runs.services import run_claim, run_phase_set, run_rewind, run_warmup_done

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner):
    run = RunFactory(owner=owner, name="r", max_steps=10)
    assert run_claim(run_id=run.pk, lease_owner="a", worker_name="w").outcome == "claimed"
    return run


def test_phase_is_set_by_the_lease_holder_only(run):
    assert run.phase == "grpo"  # the default: a run without a warm-up
    assert run_phase_set(run_id=run.pk, lease_owner="b", phase="warmup", step=0) is False
    assert not RunEvent.objects.filter(run=run, kind="phase").exists()
    Run.objects.filter(pk=run.pk).update(step=7)
    assert run_phase_set(run_id=run.pk, lease_owner="a", phase="grpo", step=0) is True
    run.refresh_from_db()
    assert (run.phase, run.step) == ("grpo", 0)
    event = RunEvent.objects.get(run=run, kind="phase")
    assert (event.message, event.data) == ("GRPO started.", {"phase": "grpo"})
    with pytest.raises(ValueError, match="unknown phase 'dpo'"):
        run_phase_set(run_id=run.pk, lease_owner="a", phase="dpo", step=0)


def test_warmup_done_is_an_event_of_the_lease_holder(run):
    data = {"episodes_seen": 8, "episodes_kept": 5, "steps": 2}
    assert run_warmup_done(run_id=run.pk, lease_owner="b", data=data) is False
    assert run_warmup_done(run_id=run.pk, lease_owner="a", data=data) is True
    event = RunEvent.objects.get(run=run, kind="warmup_done")
    assert (event.message, event.data) == ("SFT warm-up done: 5 episode(s) kept of 8.", data)


def test_rewind_keeps_a_finished_warmups_metrics(run):
    for step in (1, 2, 3, 4):
        MetricPoint.objects.create(run=run, step=step, key="sft/loss", value=1.0 / step, seq=step)
        MetricPoint.objects.create(
            run=run, step=step, key="reward", value=0.1 * step, seq=10 + step
        )
    assert run_rewind(run_id=run.pk, lease_owner="a", to_step=2, keep_warmup=True)
    points = sorted(MetricPoint.objects.filter(run=run).values_list("key", "step"))
    assert points == [
        ("reward", 1),
        ("reward", 2),
        ("sft/loss", 1),
        ("sft/loss", 2),
        ("sft/loss", 3),
        ("sft/loss", 4),
    ]
    # A warm-up being redone starts from nothing.
    assert run_rewind(run_id=run.pk, lease_owner="a", to_step=0)
    assert not MetricPoint.objects.filter(run=run).exists()
