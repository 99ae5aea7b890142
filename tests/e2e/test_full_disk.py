"""A full disk under a real worker's run (issue 23, item 9): the run's folder is a small tmpfs of its
own, filled up between two checkpoints. The save that finds no room fails with a
`checkpoint_failed` event and keeps the previous checkpoint; training goes on, and once there is
room again the next save works and the run succeeds with every step stored once.

The tmpfs needs the right to mount (root here); where there is none the test is skipped, and
tests/worker/training/test_checkpoint_save.py covers the same save with ENOSPC raised at the
checkpoint writer instead."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.helpers import (
    freeze_when,
    metric_steps,
    register_echo,
    run_config,
    wait_for,
    wait_status,
)
from tests.support.processes import worker_child_pids
from webapp.runs.checkpoints import CHECKPOINT_MARKER, run_checkpoints, run_dir
from webapp.runs.models import Run, RunEvent

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SAVE_STEPS = 3
MAX_STEPS = 9
FILLER = "filler"


@pytest.fixture
def mounts() -> Iterator[list[Path]]:
    mounted: list[Path] = []
    yield mounted
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(folder: Path) -> int:
    written = 0
    with open(folder / FILLER, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
                written += 65536
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return written


@pytest.mark.chaos
def test_a_full_disk_under_a_worker_fails_one_save_and_the_run_still_succeeds(
    api, echo_url, worker, chaos_row, mounts
):
    env_id = register_echo(api, echo_url)
    # The worker waits, frozen, while the run's folder becomes a disk of its own: it is
    # created at the run's first step, so the mount must come between the launch and the claim.
    frozen = [worker.process.pid, *worker_child_pids(worker)]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        run_id = api.post(
            "/api/runs/", run_config(env_id, max_steps=MAX_STEPS, save_steps=SAVE_STEPS), format="json"
        ).json()["id"]
        folder = run_dir(run_id)
        folder.mkdir(parents=True, exist_ok=True)  # a test database's ids start again at 1
        mount = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", str(folder)], capture_output=True, text=True
        )
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    if mount.returncode != 0:
        Run.objects.filter(pk=run_id).update(cancel_requested=True)
        pytest.skip(f"no tmpfs can be mounted here ({mount.stderr.strip()})")
    mounts.append(folder)

    [child] = worker_child_pids(worker)

    def between_saves() -> bool:
        run = Run.objects.get(pk=run_id)
        return (run.checkpoint_step or 0) >= SAVE_STEPS and run.step < 2 * SAVE_STEPS - 1

    # Frozen between the first checkpoint and the next save, so the filling cannot miss it.
    freeze_when(child, between_saves, 300, "the first checkpoint stored, the next save not begun")
    try:
        filled_at = Run.objects.get(pk=run_id).step
        assert _fill(folder) > 0
    finally:
        os.kill(child, signal.SIGCONT)

    wait_for(
        lambda: RunEvent.objects.filter(run_id=run_id, kind="checkpoint_failed").exists(), 300, "the refused save"
    )
    (folder / FILLER).unlink()  # room again: the next save must work
    run = wait_status(run_id, ("succeeded", "failed", "interrupted", "cancelled"), 300, worker)

    [failed] = RunEvent.objects.filter(run_id=run_id, kind="checkpoint_failed")
    assert failed.data["step"] == 2 * SAVE_STEPS and failed.data["kept_step"] == SAVE_STEPS
    assert failed.data["disk_full"] is True
    chaos_row(
        fault="full disk on the runs folder",
        when=f"filled at step {filled_at} of {MAX_STEPS}; the save of step {2 * SAVE_STEPS} found no room",
        outcome=f"{run.status}; that save failed with a checkpoint_failed event, step {SAVE_STEPS}'s kept; "
        "the next save worked once the filler was removed",
        recover_seconds=0.0, run_id=run_id, max_steps=MAX_STEPS, per_step=4,
        note="a 64 MB tmpfs on the run's folder under a real worker",
    )
    assert run.status == "succeeded", run.error
    assert metric_steps(run_id, "reward") == list(range(1, MAX_STEPS + 1))
    steps = [c.step for c in run_checkpoints(run=run)]
    assert SAVE_STEPS in steps and 2 * SAVE_STEPS not in steps and MAX_STEPS in steps
    assert not any(p.name.startswith(f"checkpoint-{2 * SAVE_STEPS}") for p in folder.iterdir())
    for step in (SAVE_STEPS, MAX_STEPS):
        assert (folder / f"checkpoint-{step}" / CHECKPOINT_MARKER).exists()
