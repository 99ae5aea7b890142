"""`POST /api/runs/<id>/rescore/`: the caller's finished run and one of the caller's recipes
become a queued "rescore" job with the pinned version's terms; anything else is refused
(404 / 409 / 400) and writes nothing."""

from __future__ import annotations

import json

import pytest

from tests.factories import RolloutFactory, RunFactory
from webapp.jobs.models import Job
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

TERMS = [{"name": "called", "kind": "tool_called", "weight": 2.0}]
CONFIG = {
    "name": "stored",
    "environments": [{"environment": 1, "name": "echo", "prompt": "Echo 'hi'.", "rows": 8}],
    "grpo": {"num_generations": 4, "max_steps": 2},
}


@pytest.fixture
def recipe(api) -> int:
    created = api.post("/api/reward-recipes/", {"name": "calls", "terms": TERMS}, format="json")
    assert created.status_code == 201, created.json()
    return int(created.json()["id"])


@pytest.fixture
def finished(owner) -> Run:
    run = RunFactory(
        owner=owner, name="stored", config=CONFIG, max_steps=2, status=Run.Status.SUCCEEDED,
    )
    for _ in range(3):
        RolloutFactory(run=run, env="echo", rewards={"env_reward": 1.0}, reward=1.0)
    return run


def test_a_finished_run_is_queued_for_re_scoring_with_the_pinned_version(
    api, recipe, finished, broker, django_capture_on_commit_callbacks
):
    # A second version: asking for version 1 pins version 1's terms.
    api.put(f"/api/reward-recipes/{recipe}/", {"name": "calls", "terms": [{"name": "won", "kind": "outcome"}]},
            format="json")
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/runs/{finished.pk}/rescore/", {"recipe": recipe, "version": 1}, format="json")
    assert response.status_code == 202, response.json()
    job = Job.objects.get()
    assert response.json() == {"id": job.pk, "status": "queued"}
    assert (job.kind, job.progress_total) == ("rescore", 3)
    assert job.params == {
        "run": finished.pk, "run_name": "stored", "recipe": recipe, "recipe_name": "calls", "version": 1,
        "terms": [{**TERMS[0], "params": {}}], "scale_rewards": "group", "num_generations": 4,
    }
    assert [json.loads(m)["headers"]["argsrepr"] for m in broker.lrange("train", 0, -1)] == [f"({job.pk},)"]
    # No version: the latest.
    latest = api.post(f"/api/runs/{finished.pk}/rescore/", {"recipe": recipe}, format="json")
    assert latest.status_code == 202, latest.json()
    latest_job = Job.objects.get(pk=latest.json()["id"])
    assert (latest_job.params["version"], [t["name"] for t in latest_job.params["terms"]]) == (2, ["won"])


def test_a_strangers_run_is_not_found(outsider_api, recipe, finished):
    response = outsider_api.post(f"/api/runs/{finished.pk}/rescore/", {"recipe": recipe}, format="json")
    assert response.status_code == 404
    missing = outsider_api.post("/api/runs/999999/rescore/", {"recipe": recipe}, format="json")
    assert missing.status_code == 404
    assert not Job.objects.exists()


@pytest.mark.parametrize("state", [Run.Status.QUEUED, Run.Status.RUNNING])
def test_a_run_still_training_is_a_conflict(api, recipe, finished, state):
    Run.objects.filter(pk=finished.pk).update(status=state)
    response = api.post(f"/api/runs/{finished.pk}/rescore/", {"recipe": recipe}, format="json")
    assert response.status_code == 409
    assert response.json() == {"detail": (
        f"run #{finished.pk} is {state}: re-score it once it has finished (succeeded, failed, cancelled or interrupted)"
    )}
    assert not Job.objects.exists()


@pytest.mark.parametrize("state", [Run.Status.FAILED, Run.Status.CANCELLED, Run.Status.INTERRUPTED])
def test_every_finished_state_may_be_re_scored(api, recipe, finished, state):
    Run.objects.filter(pk=finished.pk).update(status=state)
    assert api.post(f"/api/runs/{finished.pk}/rescore/", {"recipe": recipe}, format="json").status_code == 202


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({}, {"recipe": ["Field required"]}),
        ({"recipe": "1"}, {"recipe": ["Input should be a valid integer"]}),
        ({"recipe": True}, {"recipe": ["Input should be a valid integer"]}),
        ({"recipe": 0}, {"recipe": ["Input should be greater than or equal to 1"]}),
        ({"recipe": 999999}, {"recipe": ["no reward recipe with id 999999"]}),
        ({"recipe": "OWN", "version": 7}, {"recipe": ["reward recipe 'calls' has no version 7"]}),
        ({"recipe": "OWN", "version": 0}, {"version": ["Input should be greater than or equal to 1"]}),
        ({"recipe": "OWN", "bogus": 1}, {"bogus": ["Extra inputs are not permitted"]}),
        ([1, 2], {"non_field_errors": ["expected a JSON object"]}),
    ],
)
def test_a_bad_recipe_is_refused_naming_the_field(api, recipe, finished, body, errors):
    if isinstance(body, dict) and body.get("recipe") == "OWN":
        body = {**body, "recipe": recipe}
    response = api.post(f"/api/runs/{finished.pk}/rescore/", body, format="json")
    assert response.status_code == 400
    assert response.json() == errors
    assert not Job.objects.exists()


def test_another_users_recipe_reads_as_missing(api, outsider_api, finished):
    theirs = outsider_api.post("/api/reward-recipes/", {"name": "theirs", "terms": TERMS}, format="json").json()["id"]
    response = api.post(f"/api/runs/{finished.pk}/rescore/", {"recipe": theirs}, format="json")
    assert (response.status_code, response.json()) == (400, {"recipe": [f"no reward recipe with id {theirs}"]})
    assert not Job.objects.exists()


def test_a_recipe_naming_an_environment_the_run_lacks_is_refused(api, finished):
    terms = [{"name": "w", "kind": "env_reward", "environments": ["wordle"]}]
    recipe = api.post("/api/reward-recipes/", {"name": "w", "terms": terms}, format="json").json()["id"]
    response = api.post(f"/api/runs/{finished.pk}/rescore/", {"recipe": recipe}, format="json")
    assert response.status_code == 400
    assert response.json() == {"recipe": ["reward recipe 'w' v1: term 'w' names unknown environments ['wordle']"]}
