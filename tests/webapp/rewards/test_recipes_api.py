"""Reward recipes over the API: create, version, read, delete; owner-only; a rejected
request names the field and changes no row; a run launched with {"recipe": id} records the
exact version and its terms."""

from __future__ import annotations

import pytest

from tests.factories import EnvironmentFactory
from webapp.rewards.models import RewardRecipe, RewardRecipeVersion
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

WORDLE_TERMS = [
    {
        "name": "win",
        "kind": "success_bonus",
        "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": 6},
    },
    {
        "name": "greens",
        "kind": "partial_credit",
        "params": {"attribute": "best_greens", "scale": 0.1},
    },
    {
        "name": "invalid",
        "kind": "penalty",
        "weight": 1.0,
        "params": {"attribute": "invalid_moves", "scale": 0.1},
    },
]


def create(api, name="wordle three terms", terms=None):
    return api.post(
        "/api/reward-recipes/",
        {"name": name, "terms": WORDLE_TERMS if terms is None else terms},
        format="json",
    )


def test_create_read_version_and_delete(api, owner):
    created = create(api)
    assert created.status_code == 201, created.json()
    body = created.json()
    recipe = RewardRecipe.objects.get()
    assert (recipe.owner, recipe.name, recipe.latest_version) == (owner, "wordle three terms", 1)
    assert body["id"] == recipe.pk
    assert (body["name"], body["version"], body["latest_version"], body["description"]) == (
        "wordle three terms", 1, 1, "",
    )  # fmt: skip
    # Stored as validated, defaults left out (weight 1.0 is kept where it was given).
    assert body["terms"] == [
        {"name": "win", "kind": "success_bonus", "weight": 1.0, "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": 6}},
        {"name": "greens", "kind": "partial_credit", "weight": 1.0, "params": {"attribute": "best_greens", "scale": 0.1}},
        {"name": "invalid", "kind": "penalty", "weight": 1.0, "params": {"attribute": "invalid_moves", "scale": 0.1}},
    ]  # fmt: skip
    assert [v["number"] for v in body["versions"]] == [1]

    listed = api.get("/api/reward-recipes/").json()
    assert [(r["id"], r["name"], r["latest_version"]) for r in listed] == [
        (recipe.pk, "wordle three terms", 1)
    ]

    # PUT with other terms: a new immutable version; version 1 reads back unchanged.
    changed = [
        *WORDLE_TERMS[:2],
        {**WORDLE_TERMS[2], "params": {"attribute": "invalid_moves", "scale": 0.2}},
    ]
    put = api.put(
        f"/api/reward-recipes/{recipe.pk}/", {"name": "wordle v2", "terms": changed}, format="json"
    )
    assert put.status_code == 200, put.json()
    assert (put.json()["version"], put.json()["name"], [v["number"] for v in put.json()["versions"]]) == (
        2, "wordle v2", [1, 2],
    )  # fmt: skip
    assert put.json()["terms"][2]["params"] == {"attribute": "invalid_moves", "scale": 0.2}
    first = api.get(f"/api/reward-recipes/{recipe.pk}/?version=1").json()
    assert (first["version"], first["terms"][2]["params"]["scale"]) == (1, 0.1)
    assert api.get(f"/api/reward-recipes/{recipe.pk}/?version=3").status_code == 404
    assert api.get(f"/api/reward-recipes/{recipe.pk}/?version=x").status_code == 400

    # The same terms again: no new version.
    again = api.put(
        f"/api/reward-recipes/{recipe.pk}/", {"name": "wordle v2", "terms": changed}, format="json"
    )
    assert again.json()["version"] == 2
    assert RewardRecipeVersion.objects.filter(recipe=recipe).count() == 2

    assert api.delete(f"/api/reward-recipes/{recipe.pk}/").status_code == 204
    assert (RewardRecipe.objects.count(), RewardRecipeVersion.objects.count()) == (0, 0)
    assert api.get(f"/api/reward-recipes/{recipe.pk}/").status_code == 404


@pytest.mark.parametrize(
    ("terms", "errors"),
    [
        (
            [{"name": "f", "kind": "expression", "params": {"expression": "__import__('os')"}}],
            {"terms.0.params.expression": ["expression: the function '__import__' at column 1 is not allowed; use abs, clip, max, min, round"]},
        ),
        (
            [{"name": "b", "kind": "success_bonus", "params": {"speed_bonus": 0.5}}],
            {"terms.0.params.max_steps": ["a speed_bonus needs max_steps (a number or an attribute name)"]},
        ),
        (
            [{"name": "g", "kind": "gate", "terms": [{"name": "a", "kind": "outcome"}, {"name": "b", "kind": "outcome"}]}],
            {"terms.0.terms": ["a gate term takes exactly 1 child terms, not 2"]},
        ),
        (
            [{"name": "a", "kind": "outcome"}, {"name": "s", "kind": "sequential", "terms": [{"name": "a", "kind": "outcome"}]}],
            {"terms.1.terms.0.name": ["reward term names must be unique: 'a' is used twice"]},
        ),
        (
            [{"name": "p", "kind": "penalty", "params": {"attribute": "x.y"}}],
            {"terms.0.params.attribute": ["penalty: String should match pattern '^[A-Za-z][A-Za-z0-9_]{0,63}$'"]},
        ),
        ([], {"terms": ["List should have at least 1 item after validation, not 0"]}),
    ],
)  # fmt: skip
def test_a_refused_recipe_names_the_field_and_writes_nothing(api, terms, errors):
    response = create(api, terms=terms)
    assert response.status_code == 400
    assert response.json() == errors
    assert (RewardRecipe.objects.count(), RewardRecipeVersion.objects.count()) == (0, 0)


def test_a_refused_update_changes_nothing_and_names_are_unique_per_owner(api, outsider_api):
    recipe_id = create(api).json()["id"]
    assert create(api).json() == {"name": ["you already have a recipe named 'wordle three terms'"]}
    assert create(outsider_api).status_code == 201  # another owner may use the name
    bad = api.put(
        f"/api/reward-recipes/{recipe_id}/",
        {"name": "renamed", "terms": [{"name": "x", "kind": "nope"}]},
        format="json",
    )
    assert bad.status_code == 400
    assert list(bad.json()) == ["terms.0.kind"]
    recipe = RewardRecipe.objects.get(pk=recipe_id)
    assert (recipe.name, recipe.latest_version, recipe.versions.count()) == (
        "wordle three terms",
        1,
        1,
    )


def test_recipes_are_their_owners_alone(api, outsider_api, staff_api, client):
    recipe_id = create(api).json()["id"]
    for other in (outsider_api, staff_api):
        assert other.get("/api/reward-recipes/").json() == []
        assert other.get(f"/api/reward-recipes/{recipe_id}/").status_code == 404
        put = other.put(
            f"/api/reward-recipes/{recipe_id}/",
            {"name": "mine", "terms": WORDLE_TERMS},
            format="json",
        )
        assert put.status_code == 404
        assert other.delete(f"/api/reward-recipes/{recipe_id}/").status_code == 404
    assert client.get("/api/reward-recipes/").status_code == 401
    recipe = RewardRecipe.objects.get()
    assert (recipe.name, recipe.latest_version) == ("wordle three terms", 1)


@pytest.fixture
def wordle_env(echo_url, owner):
    # The echo server stands in for the health probe; the run is never trained here.
    return EnvironmentFactory(
        owner=owner,
        name="wordle",
        base_url=echo_url,
        capacity=64,
        metadata={"name": "echo"},
        status="healthy",
    )



def run_config(env_id: int, rewards) -> dict:
    return {
        "name": "t",
        "model": "demo:echo",
        "environments": [{"environment": env_id, "name": "wordle", "prompt": "Play.", "rows": 8}],
        "rewards": rewards,
        "grpo": {"num_generations": 4, "max_steps": 2, "per_device_train_batch_size": 4},
    }


def test_a_run_records_the_exact_recipe_version(api, wordle_env, built_model, settings):
    import redis

    recipe_id = create(api).json()["id"]
    api.put(
        f"/api/reward-recipes/{recipe_id}/",
        {"name": "wordle three terms", "terms": WORDLE_TERMS[:2]},
        format="json",
    )
    launched = api.post(
        "/api/runs/", run_config(wordle_env.pk, {"recipe": recipe_id, "version": 1}), format="json"
    )
    assert launched.status_code == 201, launched.json()
    run = Run.objects.get()
    assert run.config["rewards"]["recipe"] == recipe_id
    assert run.config["rewards"]["version"] == 1
    assert [t["name"] for t in run.config["rewards"]["terms"]] == ["win", "greens", "invalid"]
    # Without a version: the latest, pinned.
    latest = api.post("/api/runs/", run_config(wordle_env.pk, {"recipe": recipe_id}), format="json")
    assert latest.status_code == 201, latest.json()
    rewards = Run.objects.get(pk=latest.json()["id"]).config["rewards"]
    assert (rewards["version"], [t["name"] for t in rewards["terms"]]) == (2, ["win", "greens"])
    # The worker reads it back and compiles the recorded terms.
    from webapp.runs.config import RunConfig
    from worker.training.rewards import compile_rewards

    funcs, weights = compile_rewards(RunConfig.model_validate(run.config).rewards)
    assert ([f.__name__ for f in funcs], weights) == (["win", "greens", "invalid"], [1.0, 1.0, 1.0])
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("train")


def test_a_run_cannot_use_another_users_recipe_or_a_missing_version(
    api, outsider_api, outsider, wordle_env, built_model
):
    recipe_id = create(api).json()["id"]
    response = api.post(
        "/api/runs/", run_config(wordle_env.pk, {"recipe": recipe_id, "version": 9}), format="json"
    )
    assert response.status_code == 400
    assert response.json() == {
        "rewards.recipe": ["reward recipe 'wordle three terms' has no version 9"]
    }
    theirs = create(outsider_api, name="theirs").json()["id"]
    response = api.post("/api/runs/", run_config(wordle_env.pk, {"recipe": theirs}), format="json")
    assert response.json() == {"rewards.recipe": [f"no reward recipe with id {theirs}"]}
    limited = create(
        api, name="limited", terms=[{"name": "r", "kind": "env_reward", "environments": ["sudoku"]}]
    )
    response = api.post(
        "/api/runs/", run_config(wordle_env.pk, {"recipe": limited.json()["id"]}), format="json"
    )
    assert response.json() == {
        "rewards.recipe": [
            "reward recipe 'limited' v1: term 'r' names unknown environments ['sudoku']"
        ]
    }
    assert Run.objects.count() == 0
