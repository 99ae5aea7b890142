"""Exactly once in the store (issue 23): the training process of a real Celery worker killed
(SIGKILL) after its telemetry reached the database but before the next checkpoint, or in the
middle of writing a checkpoint; the redelivered task takes the run over from its last whole
checkpoint. No step and no rollout is missing, none is stored twice, and no row written
before the kill past that checkpoint survives beside its replayed twin."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings

from tests.e2e.helpers import (
    freeze_when,
    metric_steps,
    register_echo,
    run_config,
    wait_for,
    wait_status,
)
from tests.support.chaos import seconds_until_progress
from tests.support.processes import worker_child_pids
from webapp.runs.checkpoints import STAGING_PREFIX
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PER_STEP = 4  # per_device_train_batch_size in run_config


def _assert_exactly_once(run_id: int, max_steps: int) -> None:
    assert metric_steps(run_id, "reward") == list(range(1, max_steps + 1))
    per_step = Counter(Rollout.objects.filter(run_id=run_id).values_list("step", flat=True))
    assert per_step == {step: PER_STEP for step in range(1, max_steps + 1)}
    seqs = list(Rollout.objects.filter(run_id=run_id).values_list("seq", flat=True))
    assert len(seqs) == len(set(seqs)) == max_steps * PER_STEP


def _training(api, echo_url: str, worker, max_steps: int, save_steps: int) -> tuple[int, int]:
    """An echo run launched and running: its id, and the worker's process that trains it."""
    env_id = register_echo(api, echo_url)
    run_id = api.post(
        "/api/runs/", run_config(env_id, max_steps=max_steps, save_steps=save_steps), format="json"
    ).json()["id"]
    wait_for(lambda: Run.objects.get(pk=run_id).status == "running", 120, "the run to start")
    [child] = worker_child_pids(worker)
    return run_id, child


@pytest.mark.chaos
def test_a_kill_between_a_flush_and_the_next_checkpoint_replays_without_mixing(api, echo_url, worker, chaos_row):
    max_steps = 12
    run_id, child = _training(api, echo_url, worker, max_steps, save_steps=4)

    def flushed_past_checkpoint() -> bool:
        checkpoint = Run.objects.get(pk=run_id).checkpoint_step or 0
        newest = max(metric_steps(run_id, "reward"), default=0)
        return checkpoint > 0 and newest >= checkpoint + 2 and checkpoint + 4 <= max_steps

    freeze_when(child, flushed_past_checkpoint, 300, "two steps stored past a checkpoint")
    run = Run.objects.get(pk=run_id)
    checkpoint = run.checkpoint_step
    before = {
        row["id"]: row for row in Rollout.objects.filter(run_id=run_id).values("id", "step", "seq")
    }
    stored_past = {rid for rid, row in before.items() if row["step"] > checkpoint}
    assert stored_past, "rollouts past the checkpoint were stored before the kill"
    last_seq = run.last_seq
    killed_at = run.step
    os.kill(child, signal.SIGKILL)
    recovered = seconds_until_progress(run_id, killed_at)

    run = wait_status(run_id, ("succeeded", "failed", "interrupted"), 300, worker)
    chaos_row(
        fault="training process SIGKILL between a telemetry flush and the next checkpoint",
        when=f"step {killed_at} of {max_steps}, checkpoint {checkpoint}",
        outcome=f"{run.status} after takeover; pre-kill rows past the checkpoint replaced",
        recover_seconds=recovered, run_id=run_id, max_steps=max_steps, per_step=PER_STEP,
    )
    assert (run.status, run.attempts) == ("succeeded", 2), run.error
    assert "taken_over" in RunEvent.objects.filter(run_id=run_id).values_list("kind", flat=True)
    _assert_exactly_once(run_id, max_steps)
    after = {row["id"]: row for row in Rollout.objects.filter(run_id=run_id).values("id", "step", "seq")}
    # The checkpoint's own steps kept their rows; the pre-kill rows past it are all gone, and
    # every row past it now was written by the takeover.
    assert {rid for rid, row in before.items() if row["step"] <= checkpoint} <= set(after)
    assert not stored_past & set(after)
    assert all(row["seq"] > last_seq for row in after.values() if row["step"] > checkpoint)
    replayed = MetricPoint.objects.filter(run_id=run_id, step__gt=checkpoint)
    assert replayed.exists() and not replayed.filter(seq__lte=last_seq).exists()


@pytest.mark.chaos
def test_a_kill_during_a_checkpoint_save_is_cleaned_up_and_the_run_resumes_whole(api, echo_url, worker, chaos_row):
    max_steps = 24
    run_id, child = _training(api, echo_url, worker, max_steps, save_steps=1)
    folder = Path(settings.RUNS_DIR) / str(run_id)

    def saving() -> list[str]:
        try:
            return [entry.name for entry in os.scandir(folder) if entry.name.startswith(STAGING_PREFIX)]
        except OSError:
            return []

    # Every step saves: the process is frozen while one of its saves is under way.
    freeze_when(child, lambda: bool(saving()) and Run.objects.get(pk=run_id).step >= 2, 300, "a save under way")
    [cut_short] = saving()
    cut_step = int(cut_short.rsplit("-", 1)[1])
    killed_at = Run.objects.get(pk=run_id).step
    os.kill(child, signal.SIGKILL)
    recovered = seconds_until_progress(run_id, killed_at)

    run = wait_status(run_id, ("succeeded", "failed", "interrupted"), 300, worker)
    chaos_row(
        fault="training process SIGKILL during a checkpoint save", when=f"saving step {cut_step} of {max_steps}",
        outcome=f"{run.status} after takeover; the half-written checkpoint removed with an event",
        recover_seconds=recovered, run_id=run_id, max_steps=max_steps, per_step=PER_STEP,
    )
    assert (run.status, run.attempts) == ("succeeded", 2), run.error
    [event] = RunEvent.objects.filter(run_id=run_id, kind="checkpoint_incomplete")
    assert event.data["removed"] == [{"step": cut_step, "folder": cut_short}]
    assert event.data["start_step"] < cut_step
    assert f"Removed the half-written checkpoint (step {cut_step})" in event.message
    assert not saving()
    _assert_exactly_once(run_id, max_steps)
