"""Security review K6: an environment's capacity is checked again when a worker claims a run,
counting the sessions the runs already running on it hold. Checked at launch alone, two runs
on one shared server could together take more sessions than it has."""

from __future__ import annotations

import pytest

from tests.factories import EnvironmentFactory, RunFactory
from webapp.catalog.capacity import CAPACITY_AT_LEAST
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import run_claim

pytestmark = pytest.mark.django_db


def _config(env_id: int, batch: int) -> dict:
    return {
        "name": "r", "model": "demo:echo",
        "environments": [{"environment": env_id, "name": "echo", "prompt": "Echo '{phrase}'.", "rows": 8}],
        "grpo": {"num_generations": batch, "max_steps": 3, "per_device_train_batch_size": batch},
    }


def _run(owner, env, batch: int) -> Run:
    return RunFactory(owner=owner, config=_config(env.pk, batch))


def test_a_run_waits_while_running_runs_hold_the_sessions_it_needs(owner) -> None:
    env = EnvironmentFactory(owner=owner, name="shared-echo", capacity=8)
    first, second = _run(owner, env, 4), _run(owner, env, 8)

    assert run_claim(run_id=first.pk, lease_owner="a", worker_name="w1").outcome == "claimed"
    waiting = run_claim(run_id=second.pk, lease_owner="b", worker_name="w2")
    assert waiting.outcome == "full"
    assert Run.objects.get(pk=second.pk).status == "queued"
    [event] = RunEvent.objects.filter(run=second, kind="waiting")
    assert event.message == (
        "waiting for sessions: environment 'shared-echo' takes 8 concurrent sessions, running runs hold 4 "
        "and this run needs 8; it starts when they end"
    )
    assert run_claim(run_id=second.pk, lease_owner="b", worker_name="w2").outcome == "full"
    assert RunEvent.objects.filter(run=second, kind="waiting").count() == 1  # said once

    Run.objects.filter(pk=first.pk).update(status=Run.Status.SUCCEEDED, lease_owner="")
    assert run_claim(run_id=second.pk, lease_owner="b", worker_name="w2").outcome == "claimed"


def test_runs_that_fit_together_start_together(owner) -> None:
    env = EnvironmentFactory(owner=owner, capacity=8)
    first, second = _run(owner, env, 4), _run(owner, env, 4)
    assert run_claim(run_id=first.pk, lease_owner="a", worker_name="w1").outcome == "claimed"
    assert run_claim(run_id=second.pk, lease_owner="b", worker_name="w2").outcome == "claimed"


def test_a_lower_bound_or_unknown_capacity_never_holds_a_run_back(owner) -> None:
    measured = EnvironmentFactory(owner=owner, capacity=4, metadata={"capacity_source": CAPACITY_AT_LEAST})
    unknown = EnvironmentFactory(owner=owner, capacity=None)
    for env in (measured, unknown):
        first, second = _run(owner, env, 4), _run(owner, env, 4)
        assert run_claim(run_id=first.pk, lease_owner=f"a{env.pk}", worker_name="w1").outcome == "claimed"
        assert run_claim(run_id=second.pk, lease_owner=f"b{env.pk}", worker_name="w2").outcome == "claimed"
