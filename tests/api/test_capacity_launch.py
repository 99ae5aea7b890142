"""A capacity that is only a lower bound warns at launch; one that is the server's limit refuses.

The server is a real third-party OpenEnv server (uvicorn) whose sessions take a second each
to build, so a measurement with a short ENVLAB_PROBE_DEADLINE runs out of time before the
server's limit of 8."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.envs.servers import run_env_server
from tests.support.slow_sessions import SLOW_CAPACITY
from webapp.catalog.models import Environment
from webapp.runs.models import Run, RunEvent

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def slow_url() -> Iterator[str]:
    with run_env_server("tests.support.slow_sessions:slow_app") as url:
        yield url



def _config(env_id: int) -> dict:
    return {
        "name": "big batch",
        "model": "demo:echo",
        "environments": [{"environment": env_id, "name": "slow", "prompt": "Count to three.", "rows": 8}],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        # A generation batch of 8: what the server holds, more than the measurement saw.
        "grpo": {"num_generations": 4, "max_steps": 2, "per_device_train_batch_size": SLOW_CAPACITY},
    }


def test_a_lower_bound_warns_and_launches_and_a_declared_limit_refuses(api, slow_url, built_model, settings):
    settings.ENVLAB_PROBE_DEADLINE = 3.0
    measured = api.post(
        "/api/environments/", {"name": "slow", "base_url": slow_url, "measure_capacity": True}, format="json"
    )
    assert measured.status_code == 201, measured.json()
    body = measured.json()
    bound = body["capacity"]
    assert 1 <= bound < SLOW_CAPACITY
    assert (body["metadata"]["capacity_source"], body["metadata"]["capacity_stopped_by"]) == (
        "probed (at least)", "deadline"
    )
    assert body["capacity_note"] == f"at least {bound} (measured; the measurement ran out of time)"

    launched = api.post("/api/runs/", _config(body["id"]), format="json")

    assert launched.status_code == 201, launched.json()
    warning = (
        f"environment 'slow' takes at least {bound} concurrent session{'' if bound == 1 else 's'} (measured; "
        "the measurement ran out of time), fewer than the generation batch of 8 rollouts "
        "(per_device_train_batch_size x gradient_accumulation_steps): the run is launched, but if the server "
        "takes fewer than 8 it refuses a session and the run fails. To know its limit, measure its capacity "
        "again with a longer ENVLAB_PROBE_DEADLINE, or register it declaring its capacity"
    )
    assert launched.json()["warnings"] == [warning]
    run = Run.objects.get()
    assert (launched.json()["id"], run.status) == (run.pk, "queued")
    assert list(RunEvent.objects.filter(run=run).values_list("kind", "message", "data")) == [
        ("queued", "Run queued.", {}),
        ("launch_warning", warning, {"field": "environments.0.environment"}),
    ]
    # The run page's events (GET /api/runs/<id>/events/) carry it too.
    events = api.get(f"/api/runs/{run.pk}/events/").json()["results"]
    assert [(e["kind"], e["message"]) for e in events] == [("queued", "Run queued."), ("launch_warning", warning)]

    declared = api.post(
        "/api/environments/", {"name": "slow-declared", "base_url": slow_url, "capacity": 4}, format="json"
    )
    assert declared.status_code == 201, declared.json()
    assert declared.json()["capacity_note"] == "4 (declared)"

    refused = api.post("/api/runs/", _config(declared.json()["id"]), format="json")

    assert refused.status_code == 400
    assert refused.json() == {
        "environments.0.environment": [
            "environment 'slow-declared' takes 4 concurrent sessions (declared), fewer than the generation batch "
            "of 8 rollouts (per_device_train_batch_size x gradient_accumulation_steps): lower "
            "per_device_train_batch_size x gradient_accumulation_steps to 4 (a multiple of num_generations, 4), "
            "or make the server take more: mark its environment class concurrency-safe "
            "(SUPPORTS_CONCURRENT_SESSIONS = True) and pass max_concurrent_envs to create_app, then measure its "
            "capacity again"
        ]
    }
    assert list(Run.objects.values_list("pk", flat=True)) == [run.pk]  # the refusal wrote nothing
    assert Environment.objects.get(name="slow-declared").capacity == 4


def test_a_launch_within_the_capacity_has_no_warnings(api, slow_url, built_model):
    environment = api.post(
        "/api/environments/", {"name": "slow", "base_url": slow_url, "capacity": SLOW_CAPACITY}, format="json"
    ).json()

    launched = api.post("/api/runs/", _config(environment["id"]), format="json")

    assert launched.status_code == 201, launched.json()
    assert launched.json()["warnings"] == []
    assert not RunEvent.objects.filter(kind="launch_warning").exists()
