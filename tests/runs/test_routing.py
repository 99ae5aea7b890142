"""Routing by capability: a run's queue from its needs, a worker's queues from its heartbeat,
and launches refused (or left waiting) when no worker seen lately can carry the run.

The GPU workers here are heartbeat rows with made-up capabilities (no GPU exists on this
machine); tests/e2e/test_routing_workers.py runs real worker processes."""

from __future__ import annotations

import importlib
import json
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from tests.api.test_run_limits import config, echo_env, models_dir  # noqa: F401  (fixtures)
from webapp.runs.config import parse_run_config
from webapp.runs.models import Run, RunEvent, WorkerHeartbeat
from webapp.runs.routing import Needs, can_carry, queue_for, queues_for, run_needs

BACKFILL = importlib.import_module("webapp.runs.migrations.0008_run_queue_needs")
GPU_RUN = {"device": "cuda", "generation": {"backend": "vllm"}}


@pytest.mark.parametrize(
    ("extra", "needs", "queue"),
    [
        ({}, Needs(), "train"),
        ({"device": "cuda"}, Needs(gpus=1), "train-cuda-1"),
        ({"device": "cuda", "gpus": 4}, Needs(gpus=4), "train-cuda-4"),
        (GPU_RUN, Needs(gpus=1, vllm=True), "train-vllm-1"),
        ({**GPU_RUN, "gpus": 2}, Needs(gpus=2, vllm=True), "train-vllm-2"),
    ],
)
def test_a_runs_needs_and_queue_come_from_its_config(extra, needs, queue):
    parsed = parse_run_config({**config(1), **extra})
    assert run_needs(parsed) == needs
    assert queue_for(needs) == queue
    # Rows stored before the queue was (migration 0008) got the same answer from their config.
    assert BACKFILL._stored_needs(parsed.model_dump(mode="json")) == (needs.gpus, needs.vllm)


def test_a_broken_stored_config_was_backfilled_to_the_cpu_queue_where_the_worker_reports_it():
    assert BACKFILL._stored_needs({"name": "x"}) == (0, False)
    assert BACKFILL._stored_needs("not a dict") == (0, False)


@pytest.mark.parametrize(
    ("capabilities", "queues"),
    [
        ({"cuda_devices": 0, "vllm": False}, ["train"]),
        ({}, ["train"]),
        ({"cuda_devices": 2, "vllm": False}, ["train", "train-cuda-1", "train-cuda-2"]),
        ({"cuda_devices": 1, "vllm": True}, ["train", "train-cuda-1", "train-vllm-1"]),
        ({"cuda_devices": 0, "vllm": True}, ["train"]),  # vLLM without a GPU carries nothing more
        ({"cuda_devices": "8", "vllm": "yes"}, ["train"]),  # not a count, not True: nothing claimed
        ({"cuda_devices": True}, ["train"]),
    ],
)
def test_a_worker_consumes_every_queue_it_can_carry(capabilities, queues):
    assert queues_for(capabilities) == queues


def test_can_carry_counts_devices_and_vllm():
    two = {"cuda_devices": 2, "vllm": True}
    assert [can_carry(two, n) for n in (Needs(), Needs(1), Needs(2, True), Needs(3))] == [True, True, True, False]
    assert can_carry({"cuda_devices": 2, "vllm": False}, Needs(1, True)) is False


def test_more_than_one_gpu_needs_device_cuda():
    from webapp.runs.config import RunConfigError

    with pytest.raises(RunConfigError) as caught:
        parse_run_config({**config(1), "gpus": 2})
    assert caught.value.errors == {"gpus": ["more than one GPU needs device 'cuda'"]}


# --- at launch ---------------------------------------------------------------------------------


@pytest.fixture
def broker(settings):
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    queues = ["train", "train-vllm-1", "train-cuda-1"]
    client.delete(*queues)
    yield client
    client.delete(*queues)


def _heartbeat(name: str, capabilities: dict, *, age_seconds: float = 1.0) -> WorkerHeartbeat:
    return WorkerHeartbeat.objects.create(
        name=name, capabilities=capabilities, heartbeat_at=timezone.now() - timedelta(seconds=age_seconds)
    )


def _sent(broker, queue: str) -> list[str]:
    return [json.loads(m)["headers"]["argsrepr"] for m in broker.lrange(queue, 0, -1)]


REFUSAL = (
    "no worker with 1 CUDA device and vLLM has been seen in the last 5 minutes; start "
    '`scripts/run_worker.py` on a machine with 1 CUDA device and vLLM with the gpu extra '
    '(`pip install -c constraints-gpu.txt -e ".[gpu]"`), or set "wait_for_worker": true to queue the run until one comes'
)


@pytest.mark.django_db
def test_a_vllm_run_with_no_gpu_worker_seen_is_refused_with_the_reason(api, echo_env, models_dir, broker):  # noqa: F811
    _heartbeat("cpu@host", {"cuda_devices": 0, "vllm": False})
    _heartbeat("gpu@old", {"cuda_devices": 1, "vllm": True}, age_seconds=301)  # too long ago to count on
    response = api.post("/api/runs/", {**config(echo_env.pk), **GPU_RUN}, format="json")
    assert response.status_code == 400
    assert response.json() == {"device": [REFUSAL]}
    assert (Run.objects.count(), RunEvent.objects.count()) == (0, 0)
    assert _sent(broker, "train") == [] and _sent(broker, "train-vllm-1") == []


@pytest.mark.django_db(transaction=True)
def test_a_vllm_run_goes_to_the_vllm_queue_when_a_gpu_worker_was_seen(
    api, echo_env, models_dir, broker  # noqa: F811
):
    _heartbeat("gpu@host", {"cuda_devices": 1, "vllm": True})
    response = api.post("/api/runs/", {**config(echo_env.pk), **GPU_RUN}, format="json")
    assert response.status_code == 201, response.json()
    run_id = response.json()["id"]
    assert (response.json()["queue"], response.json()["waiting_reason"]) == ("train-vllm-1", None)
    assert _sent(broker, "train-vllm-1") == [f"({run_id},)"]
    assert _sent(broker, "train") == []
    assert list(RunEvent.objects.filter(run_id=run_id).values_list("kind", "message")) == [
        ("queued", "Run queued for a worker with 1 CUDA device and vLLM (train-vllm-1).")
    ]


@pytest.mark.django_db(transaction=True)
def test_wait_for_worker_queues_the_run_and_says_why_it_waits(api, echo_env, models_dir, broker):  # noqa: F811
    response = api.post("/api/runs/", {**config(echo_env.pk), **GPU_RUN, "wait_for_worker": True}, format="json")
    assert response.status_code == 201, response.json()
    run_id = response.json()["id"]
    waiting = "waiting: no worker with 1 CUDA device and vLLM has been seen in the last 5 minutes"
    assert response.json()["waiting_reason"] == waiting
    assert _sent(broker, "train-vllm-1") == [f"({run_id},)"]
    assert list(RunEvent.objects.filter(run_id=run_id).values_list("kind", flat=True)) == [
        "queued", "waiting_for_worker",
    ]
    assert RunEvent.objects.get(run_id=run_id, kind="waiting_for_worker").message == REFUSAL
    # A GPU worker comes: the run is no longer said to wait for one.
    _heartbeat("gpu@host", {"cuda_devices": 1, "vllm": True})
    assert api.get(f"/api/runs/{run_id}/").json()["waiting_reason"] is None


@pytest.mark.django_db
def test_cpu_runs_are_never_refused_for_want_of_a_worker(api, echo_env, models_dir, broker):  # noqa: F811
    assert WorkerHeartbeat.objects.count() == 0
    response = api.post("/api/runs/", config(echo_env.pk), format="json")
    assert response.status_code == 201, response.json()
    assert (response.json()["queue"], response.json()["waiting_reason"]) == ("train", None)


@pytest.mark.django_db
def test_the_workers_api_lists_capabilities_and_queues(api, owner):
    _heartbeat("gpu@box", {"cuda_devices": 2, "vllm": True, "fake": True})
    _heartbeat("cpu@old", {"cuda_devices": 0}, age_seconds=400)
    _heartbeat("default@vm", {"cuda_devices": 0, "consumes": ["default"]})
    listed = {item["name"]: (item["queues"], item["seen"]) for item in api.get("/api/workers/").json()}
    assert listed == {
        # No `consumes` in the heartbeat: the queues its capabilities could carry.
        "gpu@box": (["train", "train-cuda-1", "train-cuda-2", "train-vllm-1", "train-vllm-2"], True),
        "cpu@old": (["train"], False),
        "default@vm": (["default"], True),  # what it says it reads
    }


@pytest.mark.django_db
def test_the_workers_page_shows_the_fleet_and_queue_positions(client, owner, outsider, settings):
    from webapp.runs.models import Run as RunModel

    client.force_login(owner)
    _heartbeat("gpu@box", {"cuda_devices": 1, "vllm": True, "fake": True, "gpus": [
        {"name": "<b>H200</b>", "memory_mib": 143771, "memory_used_mib": 1024},
    ]})
    gpu = {**config(1), **GPU_RUN}
    vllm = {"queue": "train-vllm-1", "needs_gpus": 1, "needs_vllm": True}  # what run_launch stores
    first = RunModel.objects.create(owner=outsider, name="theirs", config=gpu, model="m", max_steps=1, **vllm)
    second = RunModel.objects.create(owner=owner, name="mine", config=gpu, model="m", max_steps=1, **vllm)
    cpu = RunModel.objects.create(owner=owner, name="cpu", config=config(1), model="m", max_steps=1)
    page = client.get("/workers/").content.decode()
    assert 'data-worker="gpu@box"' in page and ">fake<" in page
    assert "&lt;b&gt;H200&lt;/b&gt;: 1024 / 143771 MiB in use" in page  # escaped
    rows = page[page.index('id="queued-runs"'):]
    # Position counts the other user's run too, but only one's own runs are listed.
    assert f'data-run="{first.pk}"' not in rows
    assert f'<tr class="queued-row" data-run="{second.pk}">' in rows
    mine = rows[rows.index(f'data-run="{second.pk}"'):rows.index(f'data-run="{cpu.pk}"')]
    assert '<td class="queued-position">2</td>' in mine and "<code>train-vllm-1</code>" in mine
    theirs_cpu = rows[rows.index(f'data-run="{cpu.pk}"'):]
    assert '<td class="queued-position">1</td>' in theirs_cpu and "<code>train</code>" in theirs_cpu
