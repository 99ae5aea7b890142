"""`POST /api/runs/demo/`: the home page's demo button over the API. The echo environment
is a real server; the demo model folder only has to exist (the launch checks presence)."""

from __future__ import annotations

import json

import pytest

from webapp.runs.demo import demo_config
from webapp.runs.models import Run, RunEvent

pytestmark = pytest.mark.django_db

URL = "/api/runs/demo/"
NO_MODEL = "demo model 'demo:echo' is not built; run `python manage.py build_demo_model echo`"
NO_ECHO = (
    "no environment named 'echo' is registered: start the echo server and register it as "
    "'echo' on the Environments page"
)


def test_demo_launch_queues_the_demo_config_and_returns_the_run(
    api, echo_env, built_model, broker, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(URL)

    assert response.status_code == 201, response.json()
    run = Run.objects.get()
    assert response.json() == api.get(f"/api/runs/{run.pk}/").json()
    assert (response.json()["id"], response.json()["status"]) == (run.pk, "queued")
    assert (run.owner.username, run.name, run.model, run.max_steps) == (
        "owner", "echo-demo", "demo:echo", 30
    )
    expected = demo_config(echo_env.pk)
    assert run.config["environments"][0]["environment"] == echo_env.pk
    assert run.config["grpo"] | expected["grpo"] == run.config["grpo"]
    assert run.config["environments"][0]["prompt"] == expected["environments"][0]["prompt"]
    assert list(run.environments.all()) == [echo_env]
    assert list(RunEvent.objects.filter(run=run).values_list("kind", flat=True)) == ["queued"]
    messages = [json.loads(m) for m in broker.lrange("train", 0, -1)]
    assert [(m["headers"]["task"], m["headers"]["argsrepr"]) for m in messages] == [
        ("worker.tasks.train_run", f"({run.pk},)")
    ]


def test_demo_launch_matches_the_home_page_button(
    api, client, owner, echo_env, built_model, broker
):
    client.force_login(owner)
    client.post("/runs/demo/")
    api.post(URL)

    page_run, api_run = Run.objects.order_by("pk")
    assert page_run.config == api_run.config
    assert page_run.model == api_run.model == "demo:echo"


def test_without_echo_or_model_both_are_named_and_nothing_is_written(api, settings, tmp_path):
    settings.MODELS_DIR = tmp_path

    response = api.post(URL)

    assert response.status_code == 400
    assert response.json() == {"model": [NO_MODEL], "environments.0.environment": [NO_ECHO]}
    assert Run.objects.count() == 0
    assert RunEvent.objects.count() == 0


def test_another_users_private_echo_is_not_used(outsider_api, echo_env, built_model, broker):
    response = outsider_api.post(URL)

    assert response.status_code == 400
    assert response.json() == {"environments.0.environment": [NO_ECHO]}
    assert Run.objects.count() == 0


def test_the_active_run_quota_applies(api, echo_env, built_model, broker, settings):
    settings.ENVLAB_MAX_ACTIVE_RUNS = 1
    assert api.post(URL).status_code == 201

    response = api.post(URL)

    assert response.status_code == 400
    assert list(response.json()) == ["non_field_errors"]
    assert Run.objects.count() == 1


def test_the_launch_throttle_applies(api, echo_env, built_model, broker, settings):
    from django.core.cache import cache

    cache.clear()
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "launch": "1/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    assert api.post(URL).status_code == 201

    response = api.post(URL)

    cache.clear()
    assert response.status_code == 429
    assert Run.objects.count() == 1


def test_anonymous_is_refused_and_get_is_not_allowed(api):
    from rest_framework.test import APIClient

    assert APIClient().post(URL).status_code == 401
    assert api.get(URL).status_code == 405
    assert Run.objects.count() == 0
