"""Two real worker processes with different capabilities: a GPU run goes only to the one that
advertises a GPU and vLLM. That worker's GPU and vLLM are faked (ENVLAB_FAKE_CAPABILITIES;
this machine has neither), so its training then fails as a CPU machine must."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.helpers import register_echo, run_config, wait_for, wait_status
from tests.support.processes import Service, start_worker
from webapp.runs.models import Run, WorkerHeartbeat

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fake_gpu_worker(worker) -> Iterator[Service]:
    # Fake: no GPU here. The worker says so in its heartbeat ("fake": true).
    service = start_worker(
        "gpuworker", queues="train-vllm-1,train-cuda-1",
        ENVLAB_FAKE_CAPABILITIES='{"cuda_devices": 1, "vllm": true}',
    )
    yield service
    service.stop()


def test_a_vllm_run_goes_to_the_gpu_worker_and_never_to_the_cpu_worker(api, echo_url, worker, fake_gpu_worker):
    beats = wait_for(
        lambda: dict(WorkerHeartbeat.objects.values_list("name", "capabilities"))
        if WorkerHeartbeat.objects.filter(name__startswith="gpuworker@").exists()
        and WorkerHeartbeat.objects.filter(name__startswith="worker@").exists() else None,
        60, "both workers' heartbeats",
    )
    gpu = next(caps for name, caps in beats.items() if name.startswith("gpuworker@"))
    cpu = next(caps for name, caps in beats.items() if name.startswith("worker@"))
    assert (gpu["cuda_devices"], gpu["vllm"], gpu["fake"]) == (1, True, True)
    assert (cpu["cuda_devices"], cpu["vllm"], "fake" in cpu) == (0, False, False)
    listed = {item["name"].split("@")[0]: item["queues"] for item in api.get("/api/workers/").json()}
    # What each reads (its -Q), as its heartbeat says.
    assert listed["gpuworker"] == ["train-cuda-1", "train-vllm-1"]
    assert listed["worker"] == ["default", "train"]

    env_id = register_echo(api, echo_url)
    config = {**run_config(env_id, max_steps=1), "device": "cuda", "generation": {"backend": "vllm"}}
    response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["queue"] == "train-vllm-1"
    run = wait_status(response.json()["id"], ("failed", "succeeded"), 180, fake_gpu_worker)
    # What a CPU machine says when asked for vLLM: the fake stops at the GPU.
    assert (run.status, run.error.split(":")[0]) == ("failed", "ImportError")
    assert "vLLM is not available" in run.error
    task_id = Run.objects.get(pk=run.pk).claim_task_id
    assert task_id
    assert task_id in fake_gpu_worker.log_text()
    assert task_id not in worker.log_text()
