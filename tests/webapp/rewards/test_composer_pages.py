"""The recipe pages: your recipes listed, the composer for a new one and for one version of
yours (embedding what the script starts from), a 404 for anyone else's, a login first."""

from __future__ import annotations

import json

import pytest

from tests.factories import RewardRecipeFactory
from webapp.rewards.models import RewardRecipe

pytestmark = pytest.mark.django_db

TERMS = [{"name": "win", "kind": "success_bonus", "params": {"speed_bonus": 0.5, "max_steps": 6}}]


@pytest.fixture
def recipe(api) -> RewardRecipe:
    created = api.post("/api/reward-recipes/", {"name": "<b>guide</b>", "terms": TERMS}, format="json")
    assert created.status_code == 201, created.json()
    changed = [{**TERMS[0], "params": {"speed_bonus": 0.25, "max_steps": 6}}]
    assert api.put(f"/api/reward-recipes/{created.json()['id']}/", {"name": "<b>guide</b>", "terms": changed}, format="json").status_code == 200
    return RewardRecipe.objects.get()


def _embedded(response) -> dict:
    html = response.content.decode()
    start = html.index('<script id="composer-data" type="application/json">') + len('<script id="composer-data" type="application/json">')
    return json.loads(html[start:html.index("</script>", start)])


def test_the_list_shows_only_your_recipes_escaped(client, owner, outsider, recipe):
    RewardRecipeFactory(owner=outsider, name="their recipe")
    client.force_login(owner)
    response = client.get("/rewards/")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('class="recipe-row"') == 1
    assert f'href="/rewards/{recipe.pk}/">&lt;b&gt;guide&lt;/b&gt;</a>' in html
    assert "their recipe" not in html
    assert 'href="/rewards/new/"' in html
    assert 'href="/rewards/" aria-current="page">Rewards</a>' in html  # the nav link


def test_the_new_composer_embeds_the_kinds_and_urls(client, owner):
    client.force_login(owner)
    response = client.get("/rewards/new/")
    assert response.status_code == 200
    data = _embedded(response)
    assert data["recipe"] is None
    assert [k["kind"] for k in data["catalog"]["kinds"]][:3] == ["env_reward", "tool_called", "outcome"]
    assert data["urls"]["validate"] == "/api/reward-recipes/validate/"
    assert data["urls"]["page"] == "/rewards/{id}/"
    assert (data["urls"]["recipe"], data["urls"]["dry_run"]) == (None, None)
    assert 'id="dry-run-form"' not in response.content.decode()  # a draft has nothing to dry-run yet


def test_a_recipe_page_shows_the_latest_version_or_the_one_asked_for(client, owner, recipe):
    client.force_login(owner)
    latest = client.get(f"/rewards/{recipe.pk}/")
    assert latest.status_code == 200
    data = _embedded(latest)
    assert {k: data["recipe"][k] for k in ("id", "name", "version", "latest_version")} == {
        "id": recipe.pk, "name": "<b>guide</b>", "version": 2, "latest_version": 2,
    }  # fmt: skip
    assert data["recipe"]["terms"][0]["params"] == {"speed_bonus": 0.25, "max_steps": 6}
    assert data["urls"]["dry_run"] == f"/api/reward-recipes/{recipe.pk}/dry-run/"
    html = latest.content.decode()
    assert html.count('class="version-item"') == 2
    assert 'id="dry-run-form"' in html and "old-version-note" not in html

    first = client.get(f"/rewards/{recipe.pk}/?version=1")
    assert _embedded(first)["recipe"]["terms"][0]["params"] == {"speed_bonus": 0.5, "max_steps": 6}
    assert 'id="old-version-note"' in first.content.decode()
    assert client.get(f"/rewards/{recipe.pk}/?version=3").status_code == 404
    assert client.get(f"/rewards/{recipe.pk}/?version=x").status_code == 404


def test_strangers_get_a_404_and_anonymous_users_the_login(client, outsider, recipe):
    anonymous = client.get(f"/rewards/{recipe.pk}/")
    assert (anonymous.status_code, anonymous["Location"]) == (302, f"/login/?next=/rewards/{recipe.pk}/")
    assert client.get("/rewards/").status_code == 302
    client.force_login(outsider)
    assert client.get(f"/rewards/{recipe.pk}/").status_code == 404
    assert client.get(f"/rewards/{recipe.pk}/?version=1").status_code == 404


def test_the_run_form_links_to_the_composer(client, owner):
    client.force_login(owner)
    html = client.get("/runs/new/").content.decode()
    assert '<p class="help" id="recipe-composer-link">For nested terms, environment limits and a preview, <a href="/rewards/new/">compose a reward recipe</a>' in html
