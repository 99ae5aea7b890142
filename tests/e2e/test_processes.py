"""A run of several training processes (worker/training/distributed.py), end to end on CPU: a real
Celery worker launches two real `worker.training.rank` processes with the lab's launcher
(worker/training/launch.py), and they talk over gloo. This is the code path of a multi-GPU run
but for the GPUs and the backend (NCCL); on this machine there is no GPU, so the processes run on
CPU, as `"device": "cpu", "processes": 2` asks (not a stand-in: a CPU run may use several
processes too)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.e2e.helpers import metric_steps, register_echo, run_config, wait_for, wait_status
from tests.support.processes import worker_child_pids
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent

# A run, its cancel and its resume wait up to 760 s in all: more than the default timeout
# leaves once the first test has built the demo model and started the worker.
pytestmark = [
    pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(1200),
]


def _config(env_id: int, **grpo) -> dict:
    config = run_config(env_id, **grpo)
    config["processes"] = 2
    return config


def _rank_pids(run_id: int) -> dict[int, int]:
    """{rank: pid} of the run's live training processes (not their launcher)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z" or b"worker.training.rank" not in argv or b"--run-id" not in argv:
            continue
        if argv[argv.index(b"--run-id") + 1] != str(run_id).encode():
            continue
        if b"worker.training.launch" in argv:
            continue  # the launcher
        ranks = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"RANK=")]
        if ranks:
            found[int(ranks[0])] = int(entry.name)
    return found


def _no_processes_left(run_id: int) -> None:
    wait_for(lambda: not _rank_pids(run_id), 60, f"run {run_id}'s training processes to exit")


def test_two_processes_train_one_batch_each_and_the_first_records_it_all(api, echo_url, worker):
    env_id = register_echo(api, echo_url)
    response = api.post("/api/runs/", _config(env_id, max_steps=3, save_steps=2), format="json")
    assert response.status_code == 201, response.json()
    run_id = response.json()["id"]
    wait_for(
        lambda: len(_rank_pids(run_id)) == 2 or Run.objects.get(pk=run_id).status in ("failed", "succeeded", "cancelled"),
        120, "two training processes",
    )

    run = wait_status(run_id, ("succeeded", "failed", "cancelled"), 400, worker)
    assert (run.status, run.error, run.step, run.checkpoint_step) == ("succeeded", "", 3, 3)
    assert RunEvent.objects.get(run_id=run_id, kind="succeeded").data["processes"] == 2
    # One set of metrics per step, written by the first process only.
    assert metric_steps(run_id, "reward") == [1, 2, 3]
    assert metric_steps(run_id, "loss") == [1, 2, 3]
    # Both processes sampled themselves: the first its own keys, the second's under system/rank1/.
    assert metric_steps(run_id, "system/cpu_percent") and metric_steps(run_id, "system/rank1/cpu_percent")
    # Each process plays its own generation batch of 4: 8 rollouts a step, two prompt groups.
    rollouts = list(Rollout.objects.filter(run_id=run_id))
    assert len(rollouts) == 3 * 8
    for step in (1, 2, 3):
        group = [r for r in rollouts if r.step == step]
        assert len(group) == 8 and len({r.prompt_key for r in group}) == 2
        assert all(r.env == "echo" and isinstance(r.seed, int) for r in group)
        # The facts came from the process that played the episode, in TRL's order.
        assert all(r.episode["attributes"]["reward"] == pytest.approx(r.rewards["env_reward"], abs=1e-6)
                   for r in group)
    # Tool calls counted in both processes, added up: as many as TRL's own (global) frequency
    # says, and as the stored transcripts hold.
    for step in (1, 2, 3):
        values = dict(MetricPoint.objects.filter(run_id=run_id, step=step).values_list("key", "value"))
        calls = sum(1 for r in rollouts if r.step == step for m in r.messages if m.get("role") == "tool")
        assert values["tools/echo/call_total"] == calls == round(values["tools/call_frequency"] * 8), values
    log = (Path(settings.RUNS_DIR) / str(run_id) / "processes.log").read_text()
    assert "2 training processes" in log
    _no_processes_left(run_id)


def test_cancel_stops_both_processes_at_the_same_step_and_resume_finishes(api, echo_url, worker):
    env_id = register_echo(api, echo_url)
    run_id = api.post("/api/runs/", _config(env_id, max_steps=30, save_steps=50), format="json").json()["id"]
    wait_for(lambda: Run.objects.get(pk=run_id).step >= 2, 300, "two steps")
    assert api.post(f"/api/runs/{run_id}/cancel/").status_code == 200
    run = wait_status(run_id, ("cancelled", "failed", "succeeded"), 60, worker)
    assert run.status == "cancelled", run.error
    # Saved at the step both stopped at (a checkpoint needs every process to write its part).
    assert run.checkpoint_step == run.step and run.step < 30
    checkpoint = Path(settings.RUNS_DIR) / str(run_id) / f"checkpoint-{run.step}"
    assert (checkpoint / "trainer_state.json").is_file()
    assert sorted(p.name for p in checkpoint.glob("rng_state_*.pth")) == ["rng_state_0.pth", "rng_state_1.pth"]
    stopped_at = run.step
    assert metric_steps(run_id, "reward") == list(range(1, stopped_at + 1))
    _no_processes_left(run_id)

    # Resume continues from that checkpoint with two processes again, to the end.
    Run.objects.filter(pk=run_id).update(config={**run.config, "grpo": {**run.config["grpo"], "max_steps": stopped_at + 2}})
    assert api.post(f"/api/runs/{run_id}/resume/").status_code == 200
    run = wait_status(run_id, ("succeeded", "failed"), 400, worker)
    assert run.status == "succeeded", run.error
    assert metric_steps(run_id, "reward") == list(range(1, stopped_at + 3))
    assert sorted(set(Rollout.objects.filter(run_id=run_id).values_list("step", flat=True))) == list(
        range(1, stopped_at + 3)
    )
    _no_processes_left(run_id)


def test_a_killed_process_fails_the_run_with_the_log_and_stops_the_other(api, echo_url, worker):
    env_id = register_echo(api, echo_url)
    run_id = api.post("/api/runs/", _config(env_id, max_steps=30, save_steps=50), format="json").json()["id"]
    wait_for(lambda: Run.objects.get(pk=run_id).step >= 1, 300, "a step")
    pids = _rank_pids(run_id)
    assert sorted(pids) == [0, 1]
    killed = time.monotonic()
    os.kill(pids[1], signal.SIGKILL)

    run = wait_status(run_id, ("failed", "cancelled", "succeeded", "interrupted"), 120, worker)
    assert run.status == "failed"
    assert run.error.startswith("the training processes exited (code"), run.error
    assert "processes.log" in run.error
    assert time.monotonic() - killed < 120
    # What was recorded before the kill stays: the steps before it, no gap.
    steps = metric_steps(run_id, "reward")
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 1
    _no_processes_left(run_id)


def test_a_lost_worker_takes_its_processes_with_it_and_the_run_is_taken_over(api, echo_url, worker):
    """The Celery pool child that launched the processes is killed: they notice their task is
    gone and stop, the lease goes stale, and the redelivered task resumes from the checkpoint
    with two new processes."""
    env_id = register_echo(api, echo_url)
    # Steps enough that the kill lands mid-run: the processes notice within seconds, and a run
    # nearer its end could finish first (as it did on CI, with 6 steps).
    run_id = api.post("/api/runs/", _config(env_id, max_steps=10, save_steps=2), format="json").json()["id"]
    wait_for(
        lambda: (Run.objects.get(pk=run_id).checkpoint_step or 0) >= 2 and Run.objects.get(pk=run_id).step >= 3,
        300, "a checkpoint and a step past it",
    )
    first = _rank_pids(run_id)
    assert sorted(first) == [0, 1]
    [child] = worker_child_pids(worker)
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: not (set(_rank_pids(run_id).values()) & set(first.values())), 30, "the old processes to stop")

    run = wait_status(run_id, ("succeeded", "failed", "interrupted"), 400, worker)
    assert (run.status, run.attempts) == ("succeeded", 2), run.error
    assert metric_steps(run_id, "reward") == list(range(1, 11))
    assert sorted(set(Rollout.objects.filter(run_id=run_id).values_list("step", flat=True))) == list(range(1, 11))
    assert Rollout.objects.filter(run_id=run_id).count() == 10 * 8
    _no_processes_left(run_id)
