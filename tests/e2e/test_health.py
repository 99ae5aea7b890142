"""Run health end to end: real echo server, real TRL training, alerts recorded as run
events and shown by the API."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from tests.e2e.helpers import metric_steps, register_echo, run_config, wait_status
from tests.factories import RunFactory
from tests.support.broken_echo import FAILURE
from webapp.runs.models import MetricPoint, RunEvent, RunNotification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_equal_groups_raise_zero_variance_and_the_run_succeeds_with_warnings(api, echo_url, worker, listener):
    """Also the real worker's side of notifications (a loopback listener as the owner's json://
    URL: the alert and the end, each sent once by the worker's light queue) and of system metrics."""
    env_id = register_echo(api, echo_url)
    assert api.put("/api/account/secrets/notify_url/", {"value": listener.url}, format="json").status_code == 200
    config = run_config(env_id, max_steps=3)
    # One term of weight 0: every completion of every group scores the same.
    config["rewards"] = [{"name": "tool_called", "kind": "tool_called", "weight": 0.0}]
    config["alerts"] = {"zero_variance_steps": 2, "notify": ["finished", "alert"]}
    run_id = api.post("/api/runs/", config, format="json").json()["id"]

    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    posts = listener.wait_for(2, 60)

    assert (run.status, run.error, run.step) == ("succeeded", "", 3)
    body = api.get(f"/api/runs/{run_id}/").json()
    zero = [a for a in body["alerts"] if a["kind"] == "zero_variance"]
    assert zero == [{
        "kind": "zero_variance", "step": 2, "active": True,
        "message": (
            "100% of groups had the same reward for every completion over the last 2 steps: these groups "
            "teach nothing; make the task easier or harder, add a graded reward term, or raise num_generations."
        ),
    }]
    assert (body["status"], body["status_display"]) == ("succeeded", "succeeded, with warnings")
    assert RunEvent.objects.filter(run_id=run_id, kind="alert", data__alert="zero_variance").count() == 1
    listed = {r["id"]: r for r in api.get("/api/runs/").json()}
    assert listed[run_id]["status_display"] == "succeeded, with warnings"
    # The worker process sampled itself (ENVLAB_SYSTEM_METRICS_SECONDS is 1 s in the test settings).
    assert metric_steps(run_id, "system/cpu_percent") and metric_steps(run_id, "system/rss_gib")
    assert set(metric_steps(run_id, "system/rss_gib")) <= {0, 1, 2, 3}
    # Where each step's time went ("Where the time goes"): every step timed, generation and tool calls within it.
    times = {
        key: dict(MetricPoint.objects.filter(run_id=run_id, key=key).values_list("step", "value"))
        for key in ("perf/step_s", "perf/generation_s", "perf/tool_s")
    }
    assert all(sorted(points) == [1, 2, 3] for points in times.values()), times
    assert all(0 <= times["perf/generation_s"][s] <= times["perf/step_s"][s] for s in (1, 2, 3)), times
    assert sum(times["perf/tool_s"].values()) > 0  # the echo tool was called and timed
    assert sorted(body["title"] for _, body in posts) == [
        f"envlab run {run_id} (e2e): alert zero_variance at step 2",
        f"envlab run {run_id} (e2e): finished (succeeded) at step 3",
    ], worker.log_text()[-3000:]
    assert sorted(RunNotification.objects.filter(run_id=run_id).values_list("key", "state")) == [
        ("alert:zero_variance:2", "sent"), ("finished:attempt1", "sent"),
    ]


def test_a_server_whose_every_tool_call_fails_gets_tool_failures_naming_the_tool(api, broken_echo_url, worker):
    env_id = register_echo(api, broken_echo_url)
    # Room for the error text: TRL drops a tool result that would overrun the completion.
    config = run_config(env_id, max_steps=3, max_completion_length=128)
    run_id = api.post("/api/runs/", config, format="json").json()["id"]

    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)

    assert (run.status, run.error, run.step) == ("succeeded", "", 3)
    body = api.get(f"/api/runs/{run_id}/").json()
    failures = [a for a in body["alerts"] if a["kind"] == "tool_failures"]
    assert [(a["step"], a["active"]) for a in failures] == [(3, True)], body["alerts"]
    # Every call fails (each rollout makes one or two): n of n, n times the same error.
    pattern = (
        r"100% of tool calls failed at each of the last 3 steps; most failures in 'echo' \((\d+) of \1 calls\), "
        rf"most often: Server error: {FAILURE} \(code: EXECUTION_ERROR\) \(\1x\)\."
    )
    assert re.fullmatch(pattern, failures[0]["message"]), failures[0]["message"]
    assert body["status_display"] == "succeeded, with warnings"


def test_nan_loss_stops_the_run_with_a_checkpoint_and_the_reason(
    api, owner, echo_url, demo_model, monkeypatch
):
    """Trains in this process (not a Celery worker) so that the loss can be made NaN.

    Not through a reward: TRL 1.16 cannot turn any reward into a NaN loss (NaN rewards are
    dropped by nansum, and NaN or infinite advantages are normalised, then nan_to_num'd to
    0; measured: loss and grad_norm stay 0.0). So the test wraps the trainer's loss, the
    one mock here, and everything else is real: model, echo server, TRL, database."""
    from webapp.runs.config import parse_run_config
    from webapp.runs.services import run_claim
    from worker.training.runner import CapturingGRPOTrainer, train

    original = CapturingGRPOTrainer.compute_loss

    def nan_loss(self, *args, **kwargs):
        return original(self, *args, **kwargs) * float("nan")

    monkeypatch.setattr(CapturingGRPOTrainer, "compute_loss", nan_loss)
    config = parse_run_config(run_config(register_echo(api, echo_url), max_steps=4, save_steps=10))
    run = RunFactory(
        owner=owner,
        name="nan",
        config=config.model_dump(mode="json"),
        model=config.model,
        max_steps=4,
    )
    assert run_claim(run_id=run.pk, lease_owner="lease-nan", worker_name="test").outcome == "claimed"

    status = train(run_id=run.pk, lease_owner="lease-nan", worker_name="test")

    run.refresh_from_db()
    assert (status, run.status, run.step, run.checkpoint_step) == ("failed", "failed", 1, 1)
    assert re.match(r"stopped by the 'nonfinite' alert at step 1: loss is nan and grad_norm is nan", run.error), run.error
    assert (Path(settings.RUNS_DIR) / str(run.pk) / "checkpoint-1" / "trainer_state.json").is_file()
    alerts = list(RunEvent.objects.filter(run=run, kind="alert").values_list("data", flat=True))
    assert {"alert": "nonfinite", "step": 1, "active": True} in alerts
