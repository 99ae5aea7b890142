"""Stuck, not dead (issue 23 item 6): a tool call that hangs on its environment server while the
worker's heartbeat stays alive. Past ENVLAB_STALL_SECONDS the run shows a `stalled` alert naming
the call; a cancel takes effect once the call returns, and the alert clears with the step that
ends. The real stack: a worker process, Redis, the database, a uvicorn environment server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.helpers import register_echo, run_config, wait_for, wait_status
from tests.support.env_process import EnvServerProcess
from tests.support.processes import Service, worker_in_place_of
from webapp.runs.models import Run, RunEvent

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

STALL_LIMIT_S = 5  # the worker's ENVLAB_STALL_SECONDS
HANG_S = 25  # how long the armed tool call hangs: past the limit, under openenv's 60 s message timeout
TOOL_CALL = "a tool call to environment 'echo' (tool echo)"


@pytest.fixture
def stall_worker(worker) -> Iterator[Service]:
    """The session's worker, stopped for one started with a short ENVLAB_STALL_SECONDS (it is read
    at start), and started again afterwards: two workers would race for the run."""
    with worker_in_place_of(worker, "stallworker", ENVLAB_STALL_SECONDS=str(STALL_LIMIT_S)) as service:
        yield service


def _stall_alerts(run_id: int) -> list[tuple[bool, int, str]]:
    return [
        (bool(e.data["active"]), int(e.data["step"]), e.message)
        for e in RunEvent.objects.filter(run_id=run_id, kind="alert", data__alert="stalled").order_by("id")
    ]


@dataclass
class Hang:
    run_id: int
    stuck_at: int  # the run's step when its tool call hung
    hung: float  # time.monotonic() then
    before: int  # stalled alerts before the hang (loading the model may have looked like one)


@contextmanager
def hung_run(api, tmp_path: Path, *, max_steps: int) -> Iterator[Hang]:
    """A run on a real stalling echo server, two steps in, its next tool call hung for HANG_S."""
    server = EnvServerProcess(
        "tests.support.stalling_echo:app", env={"STALL_DIR": str(tmp_path), "STALL_SECONDS": str(HANG_S)}
    ).start()
    try:
        env_id = register_echo(api, server.url)
        config = run_config(env_id, max_steps=max_steps, save_steps=50)
        run_id = api.post("/api/runs/", config, format="json").json()["id"]
        wait_for(lambda: Run.objects.get(pk=run_id).step >= 2, 240, "two steps")
        before = len(_stall_alerts(run_id))
        (tmp_path / "arm").write_text("")
        wait_for(lambda: (tmp_path / "stalled").exists(), 60, "the tool call to hang", interval=0.02)
        yield Hang(run_id, Run.objects.get(pk=run_id).step, time.monotonic(), before)
    finally:
        server.stop()


def test_a_hanging_tool_call_raises_stalled_naming_it_and_a_cancel_ends_the_run_when_it_returns(
    api, client, owner, stall_worker, tmp_path
):
    with hung_run(api, tmp_path, max_steps=30) as hang:
        run_id, stuck_at, hung, before = hang.run_id, hang.stuck_at, hang.hung, hang.before

        def shown() -> dict | None:
            alerts = api.get(f"/api/runs/{run_id}/").json()["alerts"]
            return next((a for a in alerts if a["kind"] == "stalled" and a["active"]), None)

        alert = wait_for(shown, STALL_LIMIT_S + 15, "the stalled alert over REST")
        seen_after = time.monotonic() - hung
        run = Run.objects.get(pk=run_id)
        assert (run.status, run.step) == ("running", stuck_at)  # stuck, not dead: the lease is alive
        client.force_login(owner)
        page = client.get(f"/runs/{run_id}/").content.decode()

        asked = time.monotonic()
        assert api.post(f"/api/runs/{run_id}/cancel/").status_code == 200
        run = wait_status(run_id, ("cancelled", "failed", "succeeded", "interrupted"), HANG_S + 60, stall_worker)
        took = time.monotonic() - asked

    assert alert["step"] == stuck_at + 1
    assert alert["message"].startswith(f"stalled for {STALL_LIMIT_S} s in {TOOL_CALL}, in it for ")
    assert f"step {stuck_at + 1} has not ended (ENVLAB_STALL_SECONDS is {STALL_LIMIT_S})" in alert["message"]
    assert seen_after < HANG_S  # while the call still hung
    # The run page shows it in its alert banner (the template escapes the quotes).
    assert '<li class="run-alert" data-kind="stalled"><strong>stalled</strong>' in page
    assert "a tool call to environment &#x27;echo&#x27; (tool echo)" in page

    # The call returned, its step ended, and the cancel was honoured there.
    assert (run.status, run.error, run.failure, run.step) == ("cancelled", "", "", stuck_at + 1)
    assert took < HANG_S + 30, took
    after = _stall_alerts(run_id)[before:]
    assert [(active, step) for active, step, _ in after] == [(True, stuck_at + 1), (False, stuck_at + 1)]
    assert TOOL_CALL in after[0][2]
    assert after[1][2].startswith(f"training moved again: step {stuck_at + 1} ended after ")
    assert not any(a["active"] for a in api.get(f"/api/runs/{run_id}/").json()["alerts"])
    print(f"\nhung tool call: stalled alert shown {seen_after:.1f} s after the hang began, cancelled {took:.1f} s after the request")


@pytest.mark.chaos
def test_a_stall_that_ends_by_itself_clears_and_the_run_succeeds(api, stall_worker, tmp_path, chaos_row):
    """The chaos table's row: nobody acts; the hung call returns, the alert clears, and the run
    trains to its last step."""
    with hung_run(api, tmp_path, max_steps=8) as hang:
        run_id, stuck_at, hung, before = hang.run_id, hang.stuck_at, hang.hung, hang.before
        wait_for(lambda: any(a for a in _stall_alerts(run_id)[before:] if a[0]), STALL_LIMIT_S + 15, "the alert")
        seen_after = time.monotonic() - hung
        wait_for(lambda: Run.objects.get(pk=run_id).step > stuck_at, HANG_S + 60, "the step to end")
        moved_after = time.monotonic() - hung
        run = wait_status(run_id, ("succeeded", "failed", "cancelled", "interrupted"), 300, stall_worker)

    chaos_row(
        fault=f"environment stalls: a tool call hangs {HANG_S} s, nobody acts", when=f"step {stuck_at + 1} of 8",
        outcome=f"'stalled' alert naming the call after {seen_after:.0f} s (limit {STALL_LIMIT_S} s), lease kept; "
        f"cleared when the call returned; {run.status}",
        recover_seconds=round(moved_after, 1), run_id=run_id, max_steps=8, per_step=4,
        note="recovery: the hang's start to the stuck step's end (the hang itself is 25 s)",
    )
    assert (run.status, run.error, run.step) == ("succeeded", "", 8)
    after = _stall_alerts(run_id)[before:]
    # Cleared at the first beat after the call returned: steps are quick then, so by that beat
    # the counter may be a few steps on.
    assert [active for active, _, _ in after] == [True, False]
    assert after[0][1] == stuck_at + 1 and after[1][1] > stuck_at
    assert TOOL_CALL in after[0][2]
    assert seen_after < HANG_S <= moved_after + 1
