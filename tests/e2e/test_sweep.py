"""A sweep on the real stack (a worker process, Redis, the echo server): 2 x 3 members with a
quota of 2 active runs. Members wait pending and are released by the worker's own run ends
(webapp.runs.signals.run_ended), so at no moment are more than 2 queued or running."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.e2e.helpers import register_echo, run_config
from tests.support.processes import Service, worker_in_place_of
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUOTA = 2


@pytest.fixture
def quota_worker(worker, settings) -> Iterator[Service]:
    """The session's worker, stopped for one whose ENVLAB_MAX_ACTIVE_RUNS is QUOTA (it releases
    members when its runs end, under its own settings), started again afterwards: two workers
    would race for the runs."""
    settings.ENVLAB_MAX_ACTIVE_RUNS = QUOTA  # this process makes the sweep and queues its first members
    with worker_in_place_of(worker, "sweepworker", ENVLAB_MAX_ACTIVE_RUNS=str(QUOTA)) as service:
        yield service


def test_a_2x3_sweep_with_a_quota_of_2_never_has_more_than_2_active_and_all_6_finish(api, echo_url, quota_worker):
    env_id = register_echo(api, echo_url)
    base = run_config(env_id, max_steps=1, rows=8)
    grid = {"grpo.learning_rate": [1e-5, 1e-4], "grpo.seed": [0, 1, 2]}
    response = api.post("/api/sweeps/", {"name": "e2e-sweep", "base": base, "grid": grid}, format="json")
    assert response.status_code == 201, response.json()
    sweep_id = response.json()["id"]
    assert response.json()["statuses"] == {"pending": 4, "queued": 2}

    members = Run.objects.filter(sweep_member__sweep_id=sweep_id)
    most_active, polls = 0, 0
    deadline = time.monotonic() + 600
    while True:
        statuses = list(members.values_list("status", flat=True))
        polls += 1
        most_active = max(most_active, sum(status in Run.ACTIVE for status in statuses))
        if all(status not in Run.NOT_ENDED for status in statuses):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"the sweep did not end: {statuses}\n{quota_worker.log_text()[-4000:]}")
        time.sleep(0.1)

    assert most_active == QUOTA, (most_active, polls)
    assert sorted(members.values_list("status", flat=True)) == ["succeeded"] * 6, quota_worker.log_text()[-4000:]
    detail = api.get(f"/api/sweeps/{sweep_id}/").json()
    assert detail["status"] == "done"
    assert detail["paths"] == ["grpo.learning_rate", "grpo.seed"]
    assert [m["params"] for m in detail["members"]] == [
        {"grpo.learning_rate": lr, "grpo.seed": seed} for lr in (1e-5, 1e-4) for seed in (0, 1, 2)
    ]
    # Each member after the first two waited pending and was released by a run's end.
    released = [
        list(run.events.filter(kind__in=("pending", "queued")).values_list("kind", flat=True))
        for run in members.order_by("sweep_member__index")
    ]
    assert released == [["pending", "queued"]] * 6
