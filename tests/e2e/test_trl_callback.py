"""A plain TRL GRPOTrainer with envlab_client.trl.EnvlabCallback, in its own process and not through
the worker (tests/support/trl_callback_script.py), streaming into a live lab: the real ASGI web
server (its own, since the test stops it and starts it again), real Redis, the run's WebSocket.

The lab goes away before step 4 and comes back before step 7: training never waits for it; of the
three logs made while it was away, one was in flight (sent once the lab was back), one queued (the
queue holds one here), one dropped and counted."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from django.conf import settings
from knox.models import AuthToken
from websockets.sync.client import connect

from tests.factories import UserFactory
from tests.support.ports import free_port
from tests.support.processes import REPO_ROOT, service_env, start_web
from webapp.runs.models import MetricPoint, Rollout, Run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SCRIPT = REPO_ROOT / "tests" / "support" / "trl_callback_script.py"


def _wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"the script exited early:\n{process.stdout.read() if process.stdout else ''}")
        assert time.monotonic() < deadline, f"{path.name} not written in {timeout} s"
        time.sleep(0.05)


def _listen(url: str, token: str, origin: str, notes: list[dict], ready: threading.Event) -> None:
    """The run's socket until the lab goes away (no reconnect: what came before is what counts)."""
    try:
        with connect(url, additional_headers={"Authorization": f"Token {token}", "Origin": origin}, open_timeout=10) as socket:
            ready.set()
            while True:
                notes.append(json.loads(socket.recv(timeout=300)))
    except Exception:  # the lab stopped: the socket closes
        ready.set()


def test_a_plain_grpo_trainer_streams_into_the_lab_and_outlives_it(demo_model, clean_redis, tmp_path):
    from worker.demo_model import demo_model_path

    owner = UserFactory(username="trl-owner", password="pw")
    _, token = AuthToken.objects.create(user=owner)
    port = free_port()
    lab = f"http://127.0.0.1:{port}"
    web = start_web(port, name="web-trl")
    try:
        created = requests.post(
            f"{lab}/api/runs/external/", json={"name": "plain trl", "tags": ["trl"]},
            headers={"Authorization": f"Token {token}"}, timeout=30,
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        notes: list[dict] = []
        ready = threading.Event()
        listener = threading.Thread(
            target=_listen, args=(lab.replace("http", "ws") + f"/ws/runs/{run_id}/", token, lab, notes, ready), daemon=True
        )
        listener.start()
        assert ready.wait(30)
        control = tmp_path / "control"
        control.mkdir()
        env = {**service_env(), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
        env.pop("DJANGO_SETTINGS_MODULE", None)  # a researcher's script: no lab code in it
        script = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(demo_model_path(demo_model, settings.MODELS_DIR)), lab, token,
             str(run_id), str(control)],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        _wait_for(control / "down", script)
        web.stop()
        listener.join(10)
        (control / "down.ok").write_text("")
        _wait_for(control / "up", script)
        web = start_web(port, name="web-trl-again")
        (control / "up.ok").write_text("")
        output, _ = script.communicate(timeout=300)
    finally:
        web.stop()
    assert script.returncode == 0, output[-4000:]
    result = json.loads(output.strip().splitlines()[-1])

    # What the callback says it lost: the one log that found its queue full while the lab was away.
    assert (result["dropped"], result["rejected"], result["found_trainer"]) == (1, 0, True), result
    assert result["logs_while_down"] == 3
    # Never slowed: the training thread spent well under a second in the callback over 7 steps.
    assert result["hook_seconds"] < 1.0, result
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.external, run.step, run.error) == ("succeeded", True, 7, "")
    stored = set(MetricPoint.objects.filter(run=run).values_list("key", flat=True))
    last = result["logs"][-1]
    assert last["step"] == 7 and "train_runtime" in last["keys"]  # TRL's end-of-training summary
    assert set(last["keys"]) <= stored
    for entry in result["logs"]:
        if entry["step"] != 6:  # the dropped one
            assert set(entry["keys"]) <= stored, entry
    steps = sorted(set(MetricPoint.objects.filter(run=run, key="loss").values_list("step", flat=True)))
    assert steps == [1, 2, 3, 4, 5, 7]
    # Per-reward metrics as TRL names them, and the generation batches with their per-term rewards.
    assert {"rewards/short/mean", "rewards/has_digit/mean", "reward"} <= stored
    rollouts = list(Rollout.objects.filter(run=run).order_by("seq"))
    assert sorted({r.step for r in rollouts}) == [1, 2, 3, 4, 5, 7]
    assert len(rollouts) == 6 * 4  # one generation batch of 4 per step sent
    for row in rollouts:
        assert set(row.rewards) == {"short", "has_digit"}
        assert row.reward == pytest.approx(row.rewards["short"] + row.rewards["has_digit"])
        assert row.messages and row.messages[0]["role"] == "assistant" and row.advantage is not None
        assert row.prompt[0]["role"] == "user" and row.prompt[0]["content"].endswith("=")
    # The run's socket heard the steps made while the lab was up.
    metric_steps = [note["step"] for note in notes if note.get("type") == "metrics"]
    assert metric_steps[:3] == [1, 2, 3] and len(metric_steps) >= 3, notes
