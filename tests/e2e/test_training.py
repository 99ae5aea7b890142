"""The backbone, end to end: a real echo server, a real Celery worker process training
with TRL, real Redis, the real ASGI server and its WebSocket."""

from __future__ import annotations

import json
import time

import pytest
from websockets.sync.client import connect

from tests.e2e.helpers import metric_steps, register_echo, run_config, wait_for, wait_status
from tests.factories import RunFactory
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent, prompt_key

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _session_cookie(client, user) -> str:
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def test_register_launch_train_and_stream(api, owner, client, echo_url, worker, web):
    env_id = register_echo(api, echo_url)
    tools = api.get(f"/api/environments/{env_id}/").json()["tools"]
    assert [t["name"] for t in tools] == ["echo"]

    response = api.post("/api/runs/", run_config(env_id, max_steps=5), format="json")
    assert response.status_code == 201, response.json()
    run_id = response.json()["id"]

    ws_url = web.replace("http://", "ws://") + f"/ws/runs/{run_id}/"
    headers = {"Cookie": _session_cookie(client, owner), "Origin": web}
    received = []
    with connect(ws_url, additional_headers=headers, open_timeout=10) as socket:
        snapshot = json.loads(socket.recv(timeout=10))
        assert snapshot["type"] == "snapshot" and snapshot["run"] == run_id
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            message = json.loads(socket.recv(timeout=240))
            received.append(message)
            if message["type"] == "metrics":
                break
    assert any(m["type"] == "metrics" and m["seq"] > snapshot["seq"] for m in received)

    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error, run.step) == ("succeeded", "", 5)
    for key in (
        "rewards/env_reward/mean",
        "rewards/tool_called/mean",
        "tools/call_frequency",
        "tools/failure_frequency",
        "reward",
        "loss",
    ):
        assert metric_steps(run_id, key) == [1, 2, 3, 4, 5], key

    rollouts = list(Rollout.objects.filter(run_id=run_id))
    assert len(rollouts) == 5 * 4  # one generation batch of 4 per step
    assert {r.env for r in rollouts} == {"echo"}
    assert set(rollouts[0].rewards) == {"env_reward", "tool_called"}
    calls = [
        m
        for r in rollouts
        for m in r.messages
        if m.get("role") == "assistant" and m.get("tool_calls")
    ]
    results = [m for r in rollouts for m in r.messages if m.get("role") == "tool"]
    assert calls and results
    assert calls[0]["tool_calls"][0]["function"]["name"] == "echo"
    # Each rollout keeps its row's seed, the prompt it came from (one group of 4 per step
    # shares it) and what its reward terms scored, for the arena and for re-scoring.
    assert all(isinstance(r.seed, int) for r in rollouts)
    for step in range(1, 6):
        group = [r for r in rollouts if r.step == step]
        assert len({r.prompt_key for r in group}) == 1 and len({r.seed for r in group}) == 1
        assert all(r.prompt_key == prompt_key("echo", r.prompt, r.seed) for r in group)
    for r in rollouts:
        attributes = r.episode["attributes"]
        assert attributes["reward"] == pytest.approx(r.rewards["env_reward"], abs=1e-6)  # TRL keeps float32
        assert attributes["tool_calls"] >= 0 and r.episode["completion_tokens"] > 0

    series = api.get(
        f"/api/runs/{run_id}/metrics/?key=reward&key=tools/call_frequency&max_points=3"
    ).json()
    assert [p[0] for p in series["series"]["reward"]] == [1, 3, 5]
    # The worker beats every 5 s and each transactional test flushes the table, so the row
    # may not be back yet when a short run has already finished.
    workers = wait_for(lambda: api.get("/api/workers/").json(), 15, "a worker heartbeat")
    assert [w["name"] for w in workers] == ["worker@" + __import__("socket").gethostname()]
    assert workers[0]["capabilities"]["vllm"] is False
    assert workers[0]["capabilities"]["cuda_devices"] == 0  # the test machines have no GPU

    page = api.get(f"/api/runs/{run_id}/rollouts/?limit=3").json()
    assert [r["seq"] for r in page["results"]] == [r.seq for r in rollouts[:3]]
    assert page["next"] is not None


def test_websocket_refuses_strangers(owner, outsider, client, web):
    run = RunFactory(owner=owner, name="private", max_steps=1)
    url = web.replace("http://", "ws://") + f"/ws/runs/{run.pk}/"
    with connect(url, additional_headers={"Origin": web}, open_timeout=10) as socket:
        with pytest.raises(Exception) as closed:
            socket.recv(timeout=10)
    assert closed.value.rcvd.code == 4401
    headers = {"Cookie": _session_cookie(client, outsider), "Origin": web}
    with connect(url, additional_headers=headers, open_timeout=10) as socket:
        with pytest.raises(Exception) as closed:
            socket.recv(timeout=10)
    assert closed.value.rcvd.code == 4404
    # Another site's page may not open the socket with the user's cookie.
    headers = {"Cookie": _session_cookie(client, owner), "Origin": "http://evil.example"}
    with pytest.raises(Exception) as refused:
        with connect(url, additional_headers=headers, open_timeout=10) as socket:
            socket.recv(timeout=10)
    assert "403" in str(refused.value)


def test_duplicate_delivery_trains_once(api, echo_url, worker, second_worker):
    from worker.tasks import train_run

    env_id = register_echo(api, echo_url)
    run_id = api.post("/api/runs/", run_config(env_id, max_steps=6), format="json").json()["id"]
    wait_for(lambda: Run.objects.get(pk=run_id).status == "running", 120, "the run to start")
    train_run.delay(run_id)  # the same task again, while the run is alive
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert (run.status, run.attempts) == ("succeeded", 1)
    assert list(
        RunEvent.objects.filter(run_id=run_id, kind__in=["claimed", "taken_over"]).values_list(
            "kind", flat=True
        )
    ) == ["claimed"]
    assert metric_steps(run_id, "reward") == [1, 2, 3, 4, 5, 6]
    # The duplicate was delivered, waited for the live run, and then had nothing to do.
    wait_for(
        lambda: "nothing to do" in worker.log_text() + second_worker.log_text(),
        30,
        "the duplicate to finish",
    )


def test_a_run_trains_on_from_another_runs_checkpoint(api, echo_url, worker):
    """The checkpoint a run lists is a model the next run starts from: the second run's
    weights are the checkpoint's (marked here by an offset no training step could make)."""
    from django.conf import settings
    from safetensors.torch import load_file, save_file

    env_id = register_echo(api, echo_url)
    first = api.post("/api/runs/", run_config(env_id, max_steps=2, save_steps=2), format="json").json()["id"]
    wait_status(first, ("succeeded", "failed"), 300, worker)
    listed = api.get(f"/api/runs/{first}/").json()["checkpoints"]
    assert [(item["step"], item["phase"]) for item in listed] == [(2, "grpo")]
    weights_file = settings.RUNS_DIR / str(first) / "checkpoint-2" / "model.safetensors"
    weights = load_file(str(weights_file))
    name = "model.norm.weight"
    weights[name] = weights[name] + 0.5
    save_file(weights, str(weights_file), metadata={"format": "pt"})

    config = {**run_config(env_id, max_steps=1, save_steps=1), "model": {"run": first}}
    response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    second = response.json()["id"]
    assert response.json()["config"]["model"] == {"run": first, "checkpoint": 2}
    run = wait_status(second, ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error, run.model) == ("succeeded", "", f"run:{first}@2")
    demo = load_file(str(settings.MODELS_DIR / "echo" / "model.safetensors"))[name]
    after = load_file(str(settings.RUNS_DIR / str(second) / "checkpoint-1" / "model.safetensors"))[name]
    # One step at lr 5e-5 moves a weight by about 5e-5: far from the demo's, at the marked start.
    assert (after - weights[name]).abs().max().item() < 0.01
    assert (after - demo).abs().min().item() > 0.4


@pytest.mark.slow  # a real training run: once, on one database
def test_trls_own_grpo_settings_reach_the_trainer(api, echo_url, worker):
    """Dr. GRPO and DAPO's settings, an LR schedule and sampling knobs, through a real worker on
    CPU: the run trains and TRL logs what they set."""
    env_id = register_echo(api, echo_url)
    trl = {
        "loss_type": "dr_grpo", "scale_rewards": "none", "epsilon_high": 0.28, "mask_truncated_completions": True,
        "num_iterations": 2, "top_p": 0.9, "top_k": 20, "lr_scheduler_type": "constant_with_warmup",
        "warmup_steps": 2, "weight_decay": 0.01, "max_grad_norm": 0.5, "multi_objective_aggregation": "normalize_then_sum",
        "top_entropy_quantile": 0.5, "entropy_coef": 0.01,
    }
    response = api.post("/api/runs/", run_config(env_id, max_steps=3, **trl), format="json")
    assert response.status_code == 201, response.json()
    run = wait_status(response.json()["id"], ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error, run.step) == ("succeeded", "", 3)
    assert {k: run.config["grpo"][k] for k in trl} == trl
    # constant_with_warmup over 2 steps: the rate climbs to 5e-5 and stays.
    lrs = dict(MetricPoint.objects.filter(run=run, key="learning_rate").values_list("step", "value"))
    assert sorted(lrs) == [1, 2, 3]
    assert lrs[3] == pytest.approx(5e-5) and lrs[1] < 5e-5
    # The entropy bonus is on: TRL then logs the policy term apart from the bonus, every step.
    policy = MetricPoint.objects.filter(run=run, key="policy_loss").values_list("step", flat=True)
    assert sorted(policy) == [1, 2, 3]
