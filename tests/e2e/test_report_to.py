"""`report_to` (issue 20, item 4): a run that also reports to trackio, through a real worker. trackio's
own reader, in a process of its own pointed at the lab's trackio folder, returns exactly the rewards
the lab stored. trackio is installed by the dev extra; it writes to a local SQLite file (no Space,
no Hub)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from tests.e2e.helpers import register_echo, run_config, wait_status
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.sqlite_pass, pytest.mark.django_db(transaction=True)]

READ = """
import json, sys
from trackio.sqlite_storage import SQLiteStorage
rows = SQLiteStorage.get_metric_values(project="envlab", run=sys.argv[1], metric_name="train/reward")
print(json.dumps([[row["step"], row["value"]] for row in rows]))
"""


def test_a_run_reporting_to_trackio_logs_the_same_rewards_there(api, owner_client, echo_url, worker):
    trackio_dir = settings.ENVLAB_TRACKIO_DIR
    trackio_dir.mkdir(parents=True, exist_ok=True)
    for leftover in trackio_dir.glob("envlab.*"):  # an earlier session's run-<id> of the same name
        leftover.unlink()
    env_id = register_echo(api, echo_url)
    config = {**run_config(env_id, max_steps=3), "report_to": ["trackio"]}
    launched = api.post("/api/runs/", config, format="json")
    assert launched.status_code == 201, launched.json()
    run_id = launched.json()["id"]
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert run.status == "succeeded", run.error

    ours = api.get(f"/api/runs/{run_id}/metrics/?key=reward").json()["series"]["reward"]
    assert [point[0] for point in ours] == [1, 2, 3]
    read = subprocess.run(
        [sys.executable, "-c", READ, f"run-{run_id}"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "TRACKIO_DIR": str(trackio_dir)},
    )
    assert read.returncode == 0, read.stderr[-2000:]
    theirs = json.loads(read.stdout.strip().splitlines()[-1])
    assert len(theirs) == 3
    assert [value for _, value in theirs] == pytest.approx([point[1] for point in ours], abs=1e-9)

    page = owner_client.get(f"/runs/{run_id}/").content.decode()
    assert 'id="run-trackers"' in page and f"run-{run_id}" in page


def test_a_tracker_the_run_names_twice_or_with_a_harness_is_refused(api):
    response = api.post(
        "/api/runs/", {**run_config(1, max_steps=1), "report_to": ["trackio", "trackio"]}, format="json"
    )
    assert response.status_code == 400 and list(response.json()) == ["report_to"]
    response = api.post("/api/runs/", {**run_config(1, max_steps=1), "report_to": ["neptune"]}, format="json")
    assert response.status_code == 400 and list(response.json()) == ["report_to.0"]
    assert not Run.objects.exists()
