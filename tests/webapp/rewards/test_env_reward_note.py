"""The migration that tells recipes scoring with env_reward that its meaning changed on
third-party OpenEnv servers (webapp/rewards/migrations/0003_env_reward_sum_note.py)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from webapp.rewards.models import RewardRecipe
from webapp.rewards.services import recipe_create

pytestmark = pytest.mark.django_db

migration = importlib.import_module("webapp.rewards.migrations.0003_env_reward_sum_note")


def _recipe(owner, name: str, terms: list[dict]) -> RewardRecipe:
    return recipe_create(owner=owner, data={"name": name, "terms": terms})


def test_recipes_scoring_the_episode_reward_get_a_version_that_says_so(owner, api) -> None:
    plain = _recipe(owner, "plain", [{"name": "env", "kind": "env_reward"}])
    nested = _recipe(owner, "nested", [{"name": "all", "kind": "weighted_sum", "terms": [
        {"name": "env", "kind": "env_reward", "weight": 0.5},
        {"name": "called", "kind": "tool_called", "weight": 0.5},
    ]}])
    last = _recipe(owner, "last", [{"name": "env", "kind": "env_reward", "params": {"aggregate": "last"}}])
    other = _recipe(owner, "other", [{"name": "called", "kind": "tool_called"}])
    before = {r.pk: list(r.versions.values_list("terms", flat=True)) for r in (plain, nested, last, other)}

    migration.add_versions(apps, None)

    for recipe in (plain, nested):
        recipe.refresh_from_db()
        assert recipe.latest_version == 2
        v1, v2 = recipe.versions.order_by("number")
        assert (v1.note, v2.note, v2.terms) == ("", migration.NOTE, v1.terms)
        assert [v1.terms] == before[recipe.pk]
    for recipe in (last, other):  # they score the same as before: nothing to say
        recipe.refresh_from_db()
        assert (recipe.latest_version, recipe.versions.count()) == (1, 1)

    shown = api.get(f"/api/reward-recipes/{plain.pk}/").json()
    assert [(v["number"], v["note"]) for v in shown["versions"]] == [(1, ""), (2, migration.NOTE)]
    assert shown["version"] == 2
