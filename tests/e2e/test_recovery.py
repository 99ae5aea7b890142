"""Stop, crash, resume, and a Redis outage: nothing recorded is lost, no run stays
"running" forever, and the stored steps have no gaps or duplicates."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.e2e.helpers import metric_steps, register_echo, run_config, wait_for, wait_status
from tests.support.chaos import seconds_until_progress
from tests.support.processes import worker_child_pids, worker_ready
from tests.support.redis_server import owned_redis_port, start_redis, stop_redis
from webapp.runs.models import Rollout, Run, RunEvent, RunNotification
from webapp.runs.services import run_mark_stale_interrupted

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _events(run_id: int) -> list[str]:
    return list(RunEvent.objects.filter(run_id=run_id).values_list("kind", flat=True))


def _rollout_steps(run_id: int) -> list[int]:
    return sorted(set(Rollout.objects.filter(run_id=run_id).values_list("step", flat=True)))


@pytest.mark.chaos
def test_killed_training_process_is_taken_over_from_its_checkpoint(api, echo_url, worker, chaos_row, listener):
    """Also issue 22's "a killed-and-taken-over run sends nothing twice": the owner's json://
    listener gets the end once, from the attempt that finished."""
    env_id = register_echo(api, echo_url)
    assert api.put("/api/account/secrets/notify_url/", {"value": listener.url}, format="json").status_code == 200
    config = run_config(env_id, max_steps=16, save_steps=3)
    config["alerts"] = {"notify": ["finished", "failed"]}
    run_id = api.post("/api/runs/", config, format="json").json()["id"]
    wait_for(
        lambda: (
            (Run.objects.get(pk=run_id).checkpoint_step or 0) >= 3
            and Run.objects.get(pk=run_id).step >= 4
        ),
        240,
        "a checkpoint and a step past it",
    )
    [child] = worker_child_pids(worker)
    killed_at = Run.objects.get(pk=run_id).step
    os.kill(child, signal.SIGKILL)
    recovered = seconds_until_progress(run_id, killed_at)

    run = wait_status(run_id, ("succeeded", "failed", "interrupted"), 300, worker)
    chaos_row(
        fault="worker's training process SIGKILL", when=f"step {killed_at} of 16, checkpoint at 3+",
        outcome=f"{run.status} after takeover (attempt {run.attempts})", recover_seconds=recovered,
        run_id=run_id, max_steps=16, per_step=4,
    )
    assert (run.status, run.attempts) == ("succeeded", 2), run.error
    assert _events(run_id)[:3] == ["queued", "claimed", "started"]
    assert "taken_over" in _events(run_id)
    assert metric_steps(run_id, "reward") == list(range(1, 17))
    assert _rollout_steps(run_id) == list(range(1, 17))
    assert Rollout.objects.filter(run_id=run_id).count() == 16 * 4
    listener.wait_for(1, 60)
    time.sleep(3)  # room for a second send, were there one
    assert [body["title"] for _, body in listener.posts] == [f"envlab run {run_id} (e2e): finished (succeeded) at step 16"]
    assert list(RunNotification.objects.filter(run_id=run_id).values_list("key", "state")) == [
        ("finished:attempt2", "sent")
    ]


def test_cancel_stops_within_ten_seconds_with_a_checkpoint_and_resume_finishes(
    api, echo_url, worker
):
    env_id = register_echo(api, echo_url)
    run_id = api.post(
        "/api/runs/", run_config(env_id, max_steps=30, save_steps=50), format="json"
    ).json()["id"]
    wait_for(lambda: Run.objects.get(pk=run_id).step >= 2, 240, "two steps")
    asked = time.monotonic()
    assert api.post(f"/api/runs/{run_id}/cancel/").status_code == 200
    run = wait_status(run_id, ("cancelled", "failed", "succeeded"), 10, worker)
    assert time.monotonic() - asked <= 10
    assert run.status == "cancelled"
    assert run.checkpoint_step == run.step and run.step < 30
    stopped_at = run.step
    assert metric_steps(run_id, "reward") == list(range(1, stopped_at + 1))

    assert api.post(f"/api/runs/{run_id}/resume/").status_code == 200
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert run.status == "succeeded", run.error
    assert metric_steps(run_id, "reward") == list(range(1, 31))
    assert _rollout_steps(run_id) == list(range(1, 31))
    assert "resumed" in _events(run_id)


@pytest.mark.chaos
def test_dead_worker_without_redelivery_is_marked_interrupted_then_resumed(api, echo_url, worker, chaos_row):
    """The whole worker dies (main process and child): its message comes back only after the
    broker's visibility timeout, so the sweep marks the run interrupted; resume continues."""
    env_id = register_echo(api, echo_url)
    run_id = api.post(
        "/api/runs/", run_config(env_id, max_steps=16, save_steps=2), format="json"
    ).json()["id"]
    wait_for(lambda: (Run.objects.get(pk=run_id).checkpoint_step or 0) >= 2, 240, "a checkpoint")
    killed_at = Run.objects.get(pk=run_id).step
    os.killpg(worker.process.pid, signal.SIGKILL)
    worker.process.wait(10)
    killed = time.monotonic()

    def interrupted() -> bool:
        # What beat's sweep calls (worker.tasks.sweep_stale_runs, every 30 s in `make run`'s light
        # worker) is what marks it: reads never write, and this test's one worker is dead.
        run_mark_stale_interrupted()
        return api.get(f"/api/runs/{run_id}/").json()["status"] == "interrupted"

    wait_for(interrupted, 60, "the run to be marked interrupted")
    detected = time.monotonic() - killed
    assert detected <= 60
    offset = len(worker.log_text())
    worker.restart(lambda: worker_ready(worker, offset))
    assert api.post(f"/api/runs/{run_id}/resume/").status_code == 200
    resumed = seconds_until_progress(run_id, Run.objects.get(pk=run_id).step)
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    chaos_row(
        fault="whole worker SIGKILL (no redelivery)", when=f"step {killed_at} of 16",
        outcome=f"interrupted after {detected:.0f} s by beat's sweep, resumed by hand: {run.status}",
        recover_seconds=resumed, run_id=run_id, max_steps=16, per_step=4,
        note="recovery counted from the resume; the sweep runs every 30 s",
    )
    assert run.status == "succeeded", run.error
    assert metric_steps(run_id, "reward") == list(range(1, 17))
    assert _rollout_steps(run_id) == list(range(1, 17))
    assert _events(run_id).count("interrupted") == 1


@pytest.mark.chaos
def test_redis_outage_delays_the_dashboard_but_the_run_completes(api, echo_url, worker, chaos_row):
    """Redis (the test run's own) stopped for 15 s in the middle of a run."""
    port = owned_redis_port()
    if port is None:
        pytest.skip(
            "needs the test run's own Redis (make test starts one); it would stop a shared one"
        )
    env_id = register_echo(api, echo_url)
    run_id = api.post("/api/runs/", run_config(env_id, max_steps=14), format="json").json()["id"]
    wait_for(lambda: Run.objects.get(pk=run_id).step >= 2, 240, "two steps")
    stop_redis(port)
    try:
        down_at_step = Run.objects.get(pk=run_id).step
        time.sleep(15)
        during = Run.objects.get(pk=run_id).step
    finally:
        start_redis(port)
    recovered = seconds_until_progress(run_id, Run.objects.get(pk=run_id).step)
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    chaos_row(
        fault="Redis stopped 15 s", when=f"step {down_at_step} of 14",
        outcome=f"{run.status}; trained on through it (step {down_at_step} -> {during} while down)",
        recover_seconds=recovered, run_id=run_id, max_steps=14, per_step=4,
    )
    assert run.status == "succeeded", run.error
    assert during > down_at_step, "training went on while Redis was down"
    assert metric_steps(run_id, "reward") == list(range(1, 15))
    shown = api.get(f"/api/runs/{run_id}/metrics/?key=reward").json()["series"]["reward"]
    assert [p[0] for p in shown] == list(range(1, 15))
