"""The composer's preview of a freshly played episode, at the edge: `POST
/api/reward-recipes/preview/` with `play` instead of `rollout` answers 202 `{job: {id, status}}`
and queues one "preview" job with the draft's checked terms and the environment's run-local
name; every refusal (terms as a save checks them, unknown environment, a policy the environment
cannot play, a bad seed or name) is a 400 naming the field, and writes nothing. Dry runs and
learnability jobs take the same optional `name` (default: the environment's name slug as the
run form makes it). The job's played result is tested end to end (tests/e2e/test_composer_play.py).
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.helpers import register_echo
from tests.factories import EnvironmentFactory
from webapp.catalog.models import Environment
from webapp.core.textcheck import MESSAGE
from webapp.evaluations.config import DEFAULT_PROMPTS
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db

PREVIEW = "/api/reward-recipes/preview/"
TERMS = [
    {"name": "said", "kind": "env_reward"},
    {"name": "only_echo", "kind": "tool_called", "environments": ["echo"], "weight": 0.5},
]  # fmt: skip


def test_a_fresh_preview_is_a_queued_preview_job_with_the_checked_draft(
    api, owner, echo_url, broker, django_capture_on_commit_callbacks
):
    env_id = register_echo(api, echo_url)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            PREVIEW, {"terms": TERMS, "play": {"environment": env_id, "policy": "solver", "seed": 9}}, format="json"
        )
    assert response.status_code == 202, response.json()
    job = Job.objects.get()
    assert response.json() == {"job": {"id": job.pk, "status": "queued"}}
    assert (job.owner_id, job.kind, job.progress_total) == (owner.pk, "preview", 1)
    assert job.params == {
        "terms": [
            {"name": "said", "kind": "env_reward", "weight": 1.0, "params": {}},
            {"name": "only_echo", "kind": "tool_called", "weight": 0.5, "environments": ["echo"], "params": {}},
        ],
        "environment": env_id,
        "environment_name": "echo",
        "environment_key": "echo",
        "name": "echo",  # the run form's slug of the environment's name
        "prompt": DEFAULT_PROMPTS["echo"],
        "policy": {"run": None, "step": None, "spec": "solver", "label": "solver", "kind": "solver", "title": "solver"},
        "seed": 9,
    }
    assert [json.loads(m)["headers"]["argsrepr"] for m in broker.lrange("train", 0, -1)] == [f"({job.pk},)"]
    shown = api.get(f"/api/jobs/{job.pk}/").json()
    assert (shown["kind"], shown["status"], shown["progress"]) == ("preview", "queued", {"done": 0, "total": 1, "fraction": 0.0})


def test_the_fresh_preview_takes_a_run_local_name_a_prompt_and_the_random_policy(api, echo_url, broker):
    env_id = register_echo(api, echo_url)
    play = {"environment": env_id, "policy": "random", "name": "my-echo", "prompt": "Echo 'x'."}
    response = api.post(PREVIEW, {"terms": TERMS, "play": play}, format="json")
    assert response.status_code == 202, response.json()
    params = Job.objects.get().params
    assert (params["name"], params["prompt"], params["policy"]["kind"], params["seed"]) == ("my-echo", "Echo 'x'.", "random", 0)


def _other(owner, echo_url) -> Environment:
    # An OpenEnv server registered by hand, not recognised as a bundled one: it has no solver.
    return EnvironmentFactory(
        owner=owner,
        name="other",
        base_url=echo_url,
        metadata={"name": "other"},
        status="healthy",
        tools=[],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("play", "errors"),
    [
        ({"environment": 999999}, {"play.environment": ["no environment with id 999999"]}),
        ({"environment": "echo"}, {"play.environment": ["Input should be a valid integer, unable to parse string as an integer"]}),
        ({"policy": "demo:echo"}, {"play.policy": ["Input should be 'solver' or 'random'"]}),
        ({"seed": -1}, {"play.seed": ["Input should be greater than or equal to 0"]}),
        ({"seed": "x"}, {"play.seed": ["Input should be a valid integer, unable to parse string as an integer"]}),
        ({"seed": 2**31}, {"play.seed": ["Input should be less than or equal to 2147483647"]}),
        ({"name": ""}, {"play.name": ["String should have at least 1 character"]}),
        ({"name": "My Wordle"}, {"play.name": ["String should match pattern '^[a-z0-9][a-z0-9_-]*$'"]}),
        ({"bogus": 1}, {"play.bogus": ["Extra inputs are not permitted"]}),
    ],
)  # fmt: skip
def test_fresh_preview_refusals_name_the_field_and_write_nothing(api, echo_url, play, errors):
    env_id = register_echo(api, echo_url)
    response = api.post(PREVIEW, {"terms": TERMS, "play": {"environment": env_id, **play}}, format="json")
    assert (response.status_code, response.json()) == (400, errors)
    assert Job.objects.count() == 0


def test_a_policy_the_environment_cannot_play_is_refused(api, owner, echo_url):
    other = _other(owner, echo_url)
    solver = api.post(PREVIEW, {"terms": TERMS, "play": {"environment": other.pk, "policy": "solver"}}, format="json")
    assert (solver.status_code, solver.json()) == (400, {
        "play.policy": ["'other' has no solver (only the bundled echo, wordle, catch, sudoku do)"],
        "play.prompt": ["give the prompt of each episode (only the bundled environments have a default)"],
    })  # fmt: skip
    random = api.post(
        PREVIEW, {"terms": TERMS, "play": {"environment": other.pk, "policy": "random", "prompt": "p"}}, format="json"
    )
    assert (random.status_code, random.json()) == (400, {"play.policy": ["'other' lists no typed tools for a random policy to call"]})
    assert Job.objects.count() == 0


def test_the_draft_terms_are_checked_as_a_save_checks_them_with_the_play_problems(api, owner, echo_url):
    bad = [{"name": "win", "kind": "success_bonus", "params": {"speed_bonus": 0.5}}, {"name": "win", "kind": "env_reward"}]
    response = api.post(PREVIEW, {"terms": bad, "play": {"environment": 999999}}, format="json")
    assert response.status_code == 400
    checked = api.post("/api/reward-recipes/validate/", {"terms": bad}, format="json").json()
    assert {e["path"]: [e["message"]] for e in checked["errors"]} == {
        k: v for k, v in response.json().items() if k.startswith("terms")
    }
    assert response.json()["play.environment"] == ["no environment with id 999999"]
    assert len(response.json()) == 2
    assert Job.objects.count() == 0


def test_rollout_and_play_together_or_neither_are_refused(api, echo_url):
    env_id = register_echo(api, echo_url)
    both = api.post(PREVIEW, {"terms": TERMS, "rollout": {"run": 1}, "play": {"environment": env_id}}, format="json")
    assert (both.status_code, both.json()) == (
        400, {"play": ["give either rollout (a stored episode) or play (a fresh one), not both"]},
    )  # fmt: skip
    neither = api.post(PREVIEW, {"terms": TERMS}, format="json")
    assert (neither.status_code, neither.json()) == (400, {"rollout": ["Field required"]})
    assert Job.objects.count() == 0


def test_others_environments_are_not_found(outsider_api, api, echo_url):
    env_id = register_echo(api, echo_url)
    response = outsider_api.post(PREVIEW, {"terms": TERMS, "play": {"environment": env_id}}, format="json")
    assert (response.status_code, response.json()) == (400, {"play.environment": [f"no environment with id {env_id}"]})
    assert Job.objects.count() == 0


# --- the run-local name of dry runs and learnability jobs ------------------------------------------


@pytest.fixture
def recipe(api) -> int:
    created = api.post("/api/reward-recipes/", {"name": "limited", "terms": TERMS}, format="json")
    assert created.status_code == 201, created.json()
    return int(created.json()["id"])


@pytest.mark.parametrize("job", ["dry-run", "learnability"])
def test_dry_runs_and_learnability_name_the_environment_as_the_run_form_does_unless_told(api, recipe, echo_url, job):
    env_id = register_echo(api, echo_url)
    body = {"environment": env_id, "seed": 1, **({"policy": "solver", "group_size": 2} if job == "dry-run" else {"episodes": 2})}
    assert api.post(f"/api/reward-recipes/{recipe}/{job}/", body, format="json").status_code == 202
    named = api.post(f"/api/reward-recipes/{recipe}/{job}/", {**body, "name": "other"}, format="json")
    assert named.status_code == 202, named.json()
    assert [j.params["name"] for j in Job.objects.order_by("pk")] == ["echo", "other"]
    refused = api.post(f"/api/reward-recipes/{recipe}/{job}/", {**body, "name": "x" * 65}, format="json")
    assert (refused.status_code, refused.json()) == (400, {"name": ["String should have at most 64 characters"]})
    assert Job.objects.count() == 2


def test_an_environment_name_without_a_slug_binds_env(api, owner, recipe, echo_url):
    env_id = register_echo(api, echo_url)
    Environment.objects.filter(pk=env_id).update(name="Ω")  # slugify drops it: nothing is left
    response = api.post(f"/api/reward-recipes/{recipe}/dry-run/", {"environment": env_id, "policy": "solver"}, format="json")
    assert response.status_code == 202, response.json()
    assert Job.objects.get().params["name"] == "env"


def test_nul_characters_are_refused_before_the_job_is_written(api, echo_url):
    env_id = register_echo(api, echo_url)
    prompt = api.post(PREVIEW, {"terms": TERMS, "play": {"environment": env_id, "prompt": "a\x00b"}}, format="json")
    assert (prompt.status_code, prompt.json()) == (400, {"play.prompt": ["a prompt cannot hold NUL characters"]})
    limited = [{"name": "w", "kind": "weighted_sum", "terms": [{"name": "r", "kind": "env_reward", "environments": ["e\x00"]}]}]
    terms = api.post(PREVIEW, {"terms": limited, "play": {"environment": env_id}}, format="json")
    assert (terms.status_code, terms.json()) == (
        400, {"terms.0.terms.0.environments.0": [MESSAGE]},  # the recipe edge's check (webapp/core/textcheck.py)
    )  # fmt: skip
    assert Job.objects.count() == 0
