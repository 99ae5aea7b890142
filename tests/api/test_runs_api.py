"""Launching runs over the API: every rejected config is a 400 naming the field, and
writes nothing. Environments are real servers (or a port where none listens)."""

from __future__ import annotations

import pytest

from tests.envs.servers import free_port
from tests.factories import EnvironmentFactory, RunFactory
from tests.support.run_launch import launch_config as config
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("grpo", "field", "fragment"),
    [
        ({"num_generations": 1}, "grpo.num_generations", "greater than or equal to 2"),
        (
            {"num_generations": 3},
            "grpo.num_generations",
            "(3) must divide the generation batch size",
        ),
        ({"max_steps": 0}, "grpo.max_steps", "greater than or equal to 1"),
    ],
)
def test_structural_rejections_name_the_field(api, echo_env, built_model, grpo, field, fragment):
    response = api.post("/api/runs/", config(echo_env.pk, grpo=grpo), format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert fragment in response.json()[field][0]
    assert Run.objects.count() == 0


def test_unknown_environment(api, built_model):
    response = api.post("/api/runs/", config(999), format="json")
    assert response.status_code == 400
    assert response.json() == {"environments.0.environment": ["no environment with id 999"]}
    assert Run.objects.count() == 0


def test_unhealthy_environment(api, owner, built_model):
    dead = EnvironmentFactory(
        owner=owner,
        name="dead",
        base_url=f"http://127.0.0.1:{free_port()}",
        metadata={"name": "echo"},
        status="healthy",
    )
    response = api.post("/api/runs/", config(dead.pk), format="json")
    assert response.status_code == 400
    [message] = response.json()["environments.0.environment"]
    assert message == (
        f"environment 'dead' is unhealthy: the server at {dead.base_url} could not be read as an "
        "environment server (no answer, refused, timed out, redirected, too large or not JSON)"
    )
    assert Run.objects.count() == 0
    dead.refresh_from_db()
    assert dead.status == "healthy"  # a rejected request changes no row


def test_capacity_below_generation_batch(api, echo_env, built_model):
    echo_env.capacity = 2
    echo_env.save()
    response = api.post("/api/runs/", config(echo_env.pk), format="json")
    assert response.status_code == 400
    assert response.json() == {
        "environments.0.environment": [
            "environment 'echo' takes 2 concurrent sessions, fewer than the generation batch of 4 "
            "rollouts (per_device_train_batch_size x gradient_accumulation_steps): lower num_generations and "
            "per_device_train_batch_size x gradient_accumulation_steps to 2 (with num_generations 4 the smallest "
            "generation batch is 4 rollouts), or make the server take more: mark its environment class "
            "concurrency-safe (SUPPORTS_CONCURRENT_SESSIONS = True) and pass max_concurrent_envs to create_app, "
            "then measure its capacity again"
        ]
    }
    assert Run.objects.count() == 0


def test_unknown_model(api, echo_env, built_model):
    response = api.post("/api/runs/", {**config(echo_env.pk), "model": "demo:nope"}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "model": [
            "demo model 'demo:nope' is not built; run `python manage.py build_demo_model nope`"
        ]
    }
    assert Run.objects.count() == 0


def test_unknown_hub_model_offline(api, echo_env, built_model, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    response = api.post(
        "/api/runs/", {**config(echo_env.pk), "model": "no-such-org/no-such-model"}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {
        "model": [
            "model 'no-such-org/no-such-model' is not in the local hub cache and this machine is offline"
        ]
    }
    assert Run.objects.count() == 0


def test_not_json_object(api):
    response = api.post("/api/runs/", [1, 2], format="json")
    assert response.status_code == 400
    assert response.json() == {"non_field_errors": ["expected a JSON object"]}


def test_accepted_config_creates_one_queued_run(
    api, echo_env, built_model, django_capture_on_commit_callbacks, settings
):
    import json

    import redis

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("train")
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/runs/", config(echo_env.pk), format="json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get()
    assert response.json()["id"] == run.pk
    assert (run.status, run.max_steps, run.step, run.model) == ("queued", 2, 0, "demo:echo")
    assert list(run.environments.all()) == [echo_env]
    # The task went to the real broker, on the "train" queue, after the commit.
    messages = [json.loads(m) for m in broker.lrange("train", 0, -1)]
    broker.delete("train")  # no worker here: leave nothing for a later test's worker
    assert [(m["headers"]["task"], m["headers"]["argsrepr"]) for m in messages] == [
        ("worker.tasks.train_run", f"({run.pk},)")
    ]


def test_runs_are_private_to_their_owner(api, outsider_api, staff_api, operator_api, owner):
    run = RunFactory(owner=owner, name="mine")
    assert api.get(f"/api/runs/{run.pk}/").status_code == 200
    assert outsider_api.get(f"/api/runs/{run.pk}/").status_code == 404
    assert outsider_api.get(f"/api/runs/{run.pk}/metrics/").status_code == 404
    assert outsider_api.get(f"/api/runs/{run.pk}/rollouts/").status_code == 404
    assert outsider_api.post(f"/api/runs/{run.pk}/cancel/").status_code == 404
    assert outsider_api.get("/api/runs/").json() == []
    # Staff status alone shows nothing: the permission runs.view_run does.
    assert staff_api.get(f"/api/runs/{run.pk}/").status_code == 404
    assert staff_api.post(f"/api/runs/{run.pk}/cancel/").status_code == 404
    assert staff_api.post(f"/api/runs/{run.pk}/resume/").status_code == 404
    assert staff_api.get("/api/runs/").json() == []
    assert operator_api.get(f"/api/runs/{run.pk}/").status_code == 200
    assert [r["id"] for r in operator_api.get("/api/runs/").json()] == [run.pk]
    run.refresh_from_db()
    assert run.status == "queued" and run.cancel_requested is False


def test_seeing_a_run_is_not_changing_it(api, owner, django_user_model):
    from tests.fixtures.accounts import grant, token_client

    run = RunFactory(owner=owner, name="mine")
    viewer = grant(django_user_model.objects.create_user("viewer", is_staff=True), "runs.view_run")
    viewer_api = token_client(viewer)

    assert viewer_api.get(f"/api/runs/{run.pk}/").status_code == 200
    cancel = viewer_api.post(f"/api/runs/{run.pk}/cancel/")
    resume = viewer_api.post(f"/api/runs/{run.pk}/resume/")

    assert (cancel.status_code, resume.status_code) == (403, 403)
    assert cancel.json() == {
        "detail": "only the run's owner, or a user with the permission runs.change_run, may cancel or resume it"
    }
    run.refresh_from_db()
    assert (run.status, run.cancel_requested) == ("queued", False)


def test_operator_cancels_another_users_run(owner, operator_api):
    run = RunFactory(owner=owner, name="mine")

    response = operator_api.post(f"/api/runs/{run.pk}/cancel/")

    assert response.status_code == 200
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_a_run_cannot_use_another_users_private_environment(outsider_api, echo_env, built_model):
    response = outsider_api.post("/api/runs/", config(echo_env.pk), format="json")

    assert response.status_code == 400
    assert response.json() == {"environments.0.environment": [f"no environment with id {echo_env.pk}"]}
    assert Run.objects.count() == 0


def test_a_run_may_use_a_shared_environment(outsider_api, outsider, echo_env, built_model):
    echo_env.shared = True
    echo_env.save()

    response = outsider_api.post("/api/runs/", config(echo_env.pk), format="json")

    assert response.status_code == 201
    assert list(Run.objects.values_list("owner__username", "environments")) == [("outsider", echo_env.pk)]


def test_anonymous_is_refused(client):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/runs/").status_code == 401
