"""A real Harbor server: `openenv harbor serve` from the server's own Python 3.12 environment
(.venv-harbor, made by scripts/harbor_env.sh, which `make test` runs), over a dataset folder the
test makes. Unlike tests/envs/harbor_stub.py it is the whole served app (capture proxy, its
middleware) with the `harbor` package installed, so `run_rollout` really tries to start the
task's sandbox.

No sandbox can start on this machine (no Docker daemon, no cloud credentials): the server
says so in its catalog, a harness run that asks for a sandbox is refused at launch, and a
rollout comes back failed with the server's own reason, which TRL's harness loop turns into
an unscorable rollout (tests/worker/training/test_harness.py). Training on such a server needs a
sandbox and a GPU engine (issue 11's device check)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.catalog.test_harbor import expected_tasks, make_dataset
from tests.envs.servers import free_port, is_healthy
from tests.support.processes import REPO_ROOT, Service
from webapp.catalog.models import Environment
from webapp.runs.models import Run

OPENENV = REPO_ROOT / ".venv-harbor" / "bin" / "openenv"

pytestmark = [
    pytest.mark.slow, pytest.mark.sqlite_pass,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not OPENENV.exists(), reason="no .venv-harbor: scripts/harbor_env.sh found no Python 3.12 (make test runs it)"
    ),
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("harbor-real") / "mini-bench")


@pytest.fixture(scope="module")
def harbor_url(dataset: Path) -> Iterator[str]:
    port, capture = free_port(), free_port()
    # Its own environment: none of the lab's virtualenv leaks into the server's Python.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    service = Service(
        "harbor-serve",
        [str(OPENENV), "harbor", "serve", "--dataset", str(dataset), "--host", "127.0.0.1", "--port", str(port),
         "--capture-port", str(capture), "--expose", "direct"],
        {**env, "MAX_CONCURRENT_ENVS": "3", "ENABLE_WEB_INTERFACE": "false"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        service.wait_until(lambda: is_healthy(url), 120, "/health")
        yield url
    finally:
        service.stop()


def test_a_real_harbor_server_is_registered_with_its_datasets_harnesses_and_sandboxes(
    api: Any, dataset: Path, harbor_url: str
) -> None:
    response = api.post(
        "/api/environments/",
        {"name": "mini-bench", "base_url": harbor_url, "measure_capacity": True},  # kind detected
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["kind"], body["status"], body["capacity"]) == ("harbor", "healthy", 3)
    harbor = body["metadata"]["harbor"]
    assert harbor["datasets"] == [{"name": str(dataset), "num_tasks": 2}]
    assert harbor["tasks"] == expected_tasks(dataset)
    # openenv's harness table, as the served app reports it.
    validated = {h["name"] for h in harbor["harnesses"] if h["status"] == "validated"}
    assert {"mini-swe-agent", "claude-code", "codex"} <= validated, harbor["harnesses"]
    sandboxes = {s["name"]: s["available"] for s in harbor["sandboxes"]}
    assert sandboxes.get("docker") is False and not any(sandboxes.values()), sandboxes
    assert Environment.objects.get().metadata == body["metadata"]

    # A harness run on it is refused at launch: it offers no sandbox that can start.
    launch = api.post("/api/runs/", {
        "name": "harness", "model": "org/model", "device": "cuda", "wait_for_worker": True,
        "environments": [{"environment": body["id"]}],
        "generation": {"backend": "vllm", "vllm_mode": "server"},
        "grpo": {"beta": 0.0},
        "harness": {"dataset": str(dataset), "harness": "mini-swe-agent", "sandbox": "docker", "tasks": 2,
                    "max_concurrent_rollouts": 2},
    }, format="json")
    assert launch.status_code == 400, launch.json()
    # (The hub model is refused too: this machine is offline.)
    assert launch.json()["harness.sandbox"] == ["'mini-bench' offers sandboxes: none; not 'docker'"]
    assert not Run.objects.exists()


def test_a_rollout_on_a_real_server_fails_with_the_servers_reason(dataset: Path, harbor_url: str) -> None:
    from envs.adapters.harbor import TASK_INDEX_KEY, HarborSessionFactory

    factory = HarborSessionFactory(
        harbor_url, dataset=str(dataset), harness="mini-swe-agent", sandbox="docker",
        llm_url="http://127.0.0.1:9/v1", model="org/model",
    )
    session = factory.create([{"role": "user", "content": "hello-world", TASK_INDEX_KEY: 0}])
    try:
        with pytest.raises(RuntimeError, match=r"Harbor rollout of task 0 failed \(\w+\): .*[Dd]ocker"):
            session.wait_for_completion(120)
        assert session.verify([]).done is True and session.result.ok is False
    finally:
        session.close()
