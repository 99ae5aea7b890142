"""An environment server that dies mid-run (issue 23): SIGKILLed while a tool call is in flight
and started again on the same port a few seconds later, as the catalog's supervisor does, the
run waits for it and succeeds, its lost episodes unscored; kept down past
ENVLAB_ENV_OUTAGE_SECONDS (20 s in the test settings), the run stops interrupted and resumes
once the server is back. The real stack: the worker process, Redis, PostgreSQL, uvicorn."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from django.conf import settings
from django.utils import timezone

from tests.e2e.helpers import metric_steps, register_echo, run_config, wait_for, wait_status
from tests.support.chaos import seconds_until_progress
from tests.support.env_process import EnvServerProcess
from webapp.runs.models import Rollout, Run, RunEvent

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

OUTAGE_ALERT = "environment_unreachable"


def _rollout_steps(run_id: int) -> list[int]:
    return sorted(set(Rollout.objects.filter(run_id=run_id).values_list("step", flat=True)))


def _outage_alerts(run_id: int) -> list[tuple[bool, str, datetime]]:
    return [
        (bool(e.data["active"]), e.message, e.created_at)
        for e in RunEvent.objects.filter(run_id=run_id, kind="alert", data__alert=OUTAGE_ALERT).order_by("id")
    ]


@pytest.mark.chaos
def test_env_server_killed_mid_call_and_restarted_the_run_succeeds_with_lost_episodes_unscored(
    api, worker, tmp_path, chaos_row
):
    server = EnvServerProcess("tests.support.stalling_echo:app", env={"STALL_DIR": str(tmp_path)}).start()
    try:
        env_id = register_echo(api, server.url)
        run_id = api.post("/api/runs/", run_config(env_id, max_steps=30, save_steps=5), format="json").json()["id"]
        wait_for(lambda: Run.objects.get(pk=run_id).step >= 5, 240, "five steps")
        (tmp_path / "arm").write_text("")
        wait_for(lambda: (tmp_path / "stalled").exists(), 60, "a tool call in flight", interval=0.02)
        killed_at_step = Run.objects.get(pk=run_id).step
        server.kill()
        killed, killed_wall = time.monotonic(), timezone.now()
        time.sleep(2.0)  # the supervisor notices and restarts it within seconds
        server.start()
        restarted = time.monotonic() - killed
        # Recovered: a step after the kill's step is stored.
        wait_for(lambda: Run.objects.get(pk=run_id).step > killed_at_step + 1, 120, "training to go on")
        recovered = time.monotonic() - killed
        run = wait_status(run_id, ("succeeded", "failed", "interrupted"), 300, worker)
    finally:
        server.stop()

    chaos_row(
        fault="environment server SIGKILL mid tool call, back after 2 s", when=f"step {killed_at_step} of 30",
        outcome=f"{run.status} (attempt {run.attempts}); episodes in flight stored unscored",
        recover_seconds=round(recovered, 1), run_id=run_id, max_steps=30, per_step=4, key="loss",
    )
    assert (run.status, run.error, run.failure, run.attempts) == ("succeeded", "", "", 1)
    assert metric_steps(run_id, "loss") == list(range(1, 31))
    assert _rollout_steps(run_id) == list(range(1, 31))
    assert Rollout.objects.filter(run_id=run_id).count() == 30 * 4
    lost = list(Rollout.objects.filter(run_id=run_id, unscored=True).order_by("seq").values_list("seq", "step", "reward"))
    assert lost, "the episode whose call was in flight is lost"
    assert all(reward is None for _, _, reward in lost)
    [lost_step] = {step for _, step, _ in lost}  # the step whose calls met the dead server
    assert lost_step > killed_at_step >= 5
    # A step whose every rollout is unscored has no reward to log (TRL's mean of no rewards).
    everything_lost = len(lost) == 4
    assert metric_steps(run_id, "reward") == [s for s in range(1, 31) if not (everything_lost and s == lost_step)]
    events = list(RunEvent.objects.filter(run_id=run_id, kind="episode_lost").order_by("id"))
    assert sorted(seq for event in events for seq in event.data["seqs"]) == [seq for seq, _, _ in lost]
    assert all(event.data["envs"] == ["echo"] for event in events)
    alerts = _outage_alerts(run_id)
    assert [active for active, _, _ in alerts] == [True, False]
    assert alerts[0][1].startswith("environment 'echo' is unreachable (")
    assert alerts[1][1].startswith("environment 'echo' is reachable again after ")
    cleared = (alerts[1][2] - killed_wall).total_seconds()
    assert not any(a["active"] for a in api.get(f"/api/runs/{run_id}/").json()["alerts"])
    # Kill to recovery, for the report: the server back, the alert cleared, a new step stored.
    print(
        f"\nenv kill -> server healthy {restarted:.1f} s, alert cleared {cleared:.1f} s, "
        f"next step stored {recovered:.1f} s; lost episodes: {len(lost)}"
    )
    assert cleared < restarted + 15  # the backoff is capped (10 s, jittered)


@pytest.mark.chaos
def test_env_outage_past_the_limit_interrupts_the_run_and_resume_finishes(api, worker, chaos_row):
    limit = float(settings.ENVLAB_ENV_OUTAGE_SECONDS)
    server = EnvServerProcess().start()
    try:
        env_id = register_echo(api, server.url)
        run_id = api.post("/api/runs/", run_config(env_id, max_steps=12, save_steps=3), format="json").json()["id"]
        wait_for(
            lambda: (Run.objects.get(pk=run_id).checkpoint_step or 0) >= 3 and Run.objects.get(pk=run_id).step >= 4,
            240, "a checkpoint and a step past it",
        )
        killed_at = Run.objects.get(pk=run_id).step
        server.kill()
        killed = time.monotonic()

        def alert_shown() -> bool:
            alerts = api.get(f"/api/runs/{run_id}/").json()["alerts"]
            return any(a["kind"] == OUTAGE_ALERT and a["active"] for a in alerts)

        wait_for(alert_shown, 30, "the environment_unreachable alert")
        assert Run.objects.get(pk=run_id).status == "running"  # waiting, not failed
        run = wait_status(run_id, ("interrupted", "failed", "succeeded"), limit + 60, worker)
        stopped = time.monotonic() - killed
        assert (run.status, run.failure) == ("interrupted", "")
        assert run.error.startswith("interrupted: environment 'echo' has been unreachable for ")
        assert f"(ENVLAB_ENV_OUTAGE_SECONDS is {limit:g})" in run.error
        assert run.error.endswith(
            f"Resume continues from checkpoint step {run.checkpoint_step} once the environment server answers again."
        )
        assert limit <= stopped < limit + 30, stopped
        shown = api.get(f"/api/runs/{run_id}/").json()
        assert (shown["status"], shown["resumable"], shown["resumable_reason"]) == ("interrupted", True, None)
        checkpoint = run.checkpoint_step

        server.start()
        response = api.post(f"/api/runs/{run_id}/resume/")
        assert response.status_code == 200, response.json()
        resumed = seconds_until_progress(run_id, Run.objects.get(pk=run_id).step)
        run = wait_status(run_id, ("succeeded", "failed", "interrupted"), 300, worker)
    finally:
        server.stop()
    chaos_row(
        fault=f"environment server down past ENVLAB_ENV_OUTAGE_SECONDS ({limit:g} s)", when=f"step {killed_at} of 12",
        outcome=f"interrupted after {stopped:.0f} s, resumed by hand from checkpoint {checkpoint}: {run.status}",
        recover_seconds=resumed, run_id=run_id, max_steps=12, per_step=4, key="loss",
        note="recovery counted from the resume",
    )
    assert (run.status, run.attempts) == ("succeeded", 2), run.error
    assert checkpoint is not None and checkpoint >= 3
    assert metric_steps(run_id, "loss") == list(range(1, 13))
    # A step whose every rollout was lost to the kill logs no reward (TRL's mean of none).
    scored = sorted(set(Rollout.objects.filter(run_id=run_id, unscored=False).values_list("step", flat=True)))
    assert metric_steps(run_id, "reward") == scored
    assert len(scored) >= 11
    assert _rollout_steps(run_id) == list(range(1, 13))
    assert Rollout.objects.filter(run_id=run_id).count() == 12 * 4
    kinds = list(RunEvent.objects.filter(run_id=run_id).values_list("kind", flat=True).order_by("id"))
    assert kinds.count("interrupted") == 1 and "resumed" in kinds and "failed" not in kinds
    print(f"\nenv kept down: run interrupted {stopped:.1f} s after the kill (limit {limit:g} s), resumed from {checkpoint}")


def test_a_run_cancelled_while_its_environment_is_away_stops_without_waiting_out_the_limit(api, worker):
    server = EnvServerProcess().start()
    try:
        env_id = register_echo(api, server.url)
        run_id = api.post("/api/runs/", run_config(env_id, max_steps=30, save_steps=3), format="json").json()["id"]
        wait_for(lambda: (Run.objects.get(pk=run_id).checkpoint_step or 0) >= 3, 240, "a checkpoint")
        server.kill()
        wait_for(
            lambda: RunEvent.objects.filter(run_id=run_id, kind="alert", data__alert=OUTAGE_ALERT).exists(),
            30, "the environment_unreachable alert",
        )
        asked = time.monotonic()
        assert api.post(f"/api/runs/{run_id}/cancel/").status_code == 200
        run = wait_status(run_id, ("cancelled", "interrupted", "failed", "succeeded"), 30, worker)
        took = time.monotonic() - asked
    finally:
        server.stop()
    assert (run.status, run.error, run.failure) == ("cancelled", "cancelled while waiting for an environment server", "")
    assert took < 15, took  # within a backoff delay (10 s at most) and a heartbeat, not the 20 s limit
    assert api.get(f"/api/runs/{run_id}/").json()["resumable"] is True
    print(f"\ncancel during an outage: cancelled {took:.1f} s after the request")
