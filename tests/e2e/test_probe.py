"""The learnability probe through a real worker (issue 19 item 5): the demo model, sampled at the
config's temperature in groups of its num_generations, plays the echo server and is scored by
the config's reward; the report's pass rate and its predicted share of flat groups agree with
the episodes it played, and launching the config quotes it."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import register_echo, run_config, wait_for
from tests.support.processes import frozen_workers
from webapp.jobs.models import Job
from webapp.runs.models import Run, RunEvent

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_probe_plays_the_configs_groups_and_its_launch_quotes_it(api, echo_url, worker):
    env_id = register_echo(api, echo_url)
    config = run_config(env_id, max_steps=2)
    response = api.post("/api/runs/probe/", {"config": config, "groups": 2}, format="json")
    assert response.status_code == 202, response.json()
    job_id = response.json()["id"]
    wait_for(lambda: Job.objects.get(pk=job_id).status in ("succeeded", "failed"), 300, f"probe {job_id}")
    shown = api.get(f"/api/jobs/{job_id}/").json()
    assert (shown["status"], shown["error"], shown["progress"]["done"]) == ("succeeded", "", 8), shown
    result, probe = shown["result"], shown["result"]["probe"]
    assert (result["groups"], result["group_size"], probe["episodes"], probe["group_size"]) == (2, 4, 8, 4)
    assert probe["pass_rate"] == probe["passed"] / 8
    p = probe["pass_rate"]
    assert probe["expected_zero_variance_fraction"] == pytest.approx(p**4 + (1 - p) ** 4)
    assert bool(probe["warning"]) == (probe["expected_zero_variance_fraction"] > 0.5)
    # A plain env_reward term has no known range: the middle of what was scored is the bar.
    assert probe["threshold_from"] == "the middle of the totals scored here"
    assert probe["pass_threshold"] == pytest.approx((result["total"]["min"] + result["total"]["max"]) / 2)

    with frozen_workers():  # the launch is only read here: no worker trains it
        launched = api.post("/api/runs/", config, format="json").json()
        first = RunEvent.objects.filter(run_id=launched["id"]).order_by("pk").first()
        assert first.kind == "queued" and first.data["probe"]["job"] == job_id
        assert f"Learnability probe (job #{job_id}, 8 episodes)" in first.message
        Run.objects.filter(pk=launched["id"]).update(status=Run.Status.CANCELLED)
