"""One paging shape for every list (webapp/core/paging.py): `limit`/`offset` answer
`{count, next, previous, results}`; without them the v1 bare list, with `X-Total-Count`, and a
capped one says where the rest is (`Link: rel="next"`) instead of dropping it silently."""

from __future__ import annotations

import pytest

from tests.factories import EnvironmentFactory, EvaluationFactory, RunFactory
from webapp.evaluations import apis as evaluation_apis
from webapp.rewards import apis as reward_apis
from webapp.rewards.services import recipe_create

pytestmark = pytest.mark.django_db

LISTS = [
    "/api/environments/", "/api/runs/", "/api/evaluations/", "/api/sweeps/", "/api/reward-recipes/",
    "/api/catalog-snapshots/", "/api/auth/tokens/", "/api/account/secrets/", "/api/presets/", "/api/workers/",
]


def _recipe(owner, name: str):
    return recipe_create(owner=owner, data={"name": name, "terms": [{"name": "e", "kind": "env_reward"}]})


@pytest.mark.parametrize("path", LISTS)
def test_every_list_answers_a_bare_list_or_one_page_in_one_shape(api, owner, path):
    EnvironmentFactory(owner=owner, name="e1")
    RunFactory(owner=owner, name="r1")
    _recipe(owner, "a")
    bare = api.get(path)
    assert bare.status_code == 200, bare.content
    items = bare.json()
    assert isinstance(items, list)
    assert bare["X-Total-Count"] == str(len(items)) and not bare.has_header("Link")

    page = api.get(path, {"limit": 1})
    assert page.status_code == 200
    body = page.json()
    assert list(body) == ["count", "next", "previous", "results"]
    assert body["count"] == len(items) and body["results"] == items[:1] and body["previous"] is None
    assert (body["next"] is None) == (len(items) <= 1)

    assert api.get(path, {"offset": 0}).json()["results"] == items[:50]
    for bad in ({"limit": 0}, {"limit": 501}, {"limit": "x"}, {"offset": -1}):
        refused = api.get(path, bad)
        assert refused.status_code == 400 and list(refused.json()) == [next(iter(bad))], (path, bad)


def test_pages_walk_the_whole_list_once(api, owner):
    for i in range(5):
        _recipe(owner, f"r{i}")
    seen, url = [], "/api/reward-recipes/?limit=2"
    while url:
        body = api.get(url).json()
        assert body["count"] == 5
        seen += [r["name"] for r in body["results"]]
        url = body["next"]
    assert sorted(seen) == [f"r{i}" for i in range(5)]
    last = api.get("/api/reward-recipes/", {"limit": 2, "offset": 4}).json()
    assert last["next"] is None and "offset=2" in last["previous"]


def test_a_capped_bare_list_says_how_many_there_are_and_links_to_the_rest(api, owner, monkeypatch):
    monkeypatch.setattr(reward_apis, "RECIPES_LIST_CAP", 2)
    for i in range(3):
        _recipe(owner, f"r{i}")
    first = api.get("/api/reward-recipes/?search=")
    assert len(first.json()) == 2
    assert first["X-Total-Count"] == "3"
    link = first["Link"]
    assert link.startswith("<http://testserver/api/reward-recipes/?") and link.endswith('>; rel="next"')
    following = link[1 : link.index(">")]
    assert "limit=2" in following and "offset=2" in following and "search=" in following
    rest = api.get(following).json()
    assert rest["count"] == 3 and len(rest["results"]) == 1 and rest["next"] is None
    assert {r["name"] for r in first.json()} | {r["name"] for r in rest["results"]} == {"r0", "r1", "r2"}


def test_the_evaluation_episodes_keep_their_page_shape_with_links(api, owner, monkeypatch):
    from webapp.evaluations.models import EvaluationEpisode

    monkeypatch.setattr(evaluation_apis, "MAX_PAGE_SIZE", 100)
    evaluation = EvaluationFactory(owner=owner, episodes=3)
    for index in range(3):
        EvaluationEpisode.objects.create(
            evaluation=evaluation, model_index=0, model="solver", index=index, seed=index, messages=[], reward=0.5,
        )
    url = f"/api/evaluations/{evaluation.pk}/episodes/"
    v1 = api.get(url, {"page": 1, "page_size": 2}).json()
    assert [v1[k] for k in ("count", "page", "page_size", "previous")] == [3, 1, 2, None]
    assert "page=2" in v1["next"] and len(v1["results"]) == 2
    second = api.get(v1["next"]).json()
    assert second["next"] is None and "page=1" in second["previous"] and len(second["results"]) == 1
    page = api.get(url, {"limit": 2, "offset": 2}).json()
    assert list(page) == ["count", "next", "previous", "results"] and page["count"] == 3
    assert page["results"] == second["results"]


def test_cursor_lists_answer_the_same_shape_with_a_count_on_every_page(api, owner):
    from webapp.runs.models import Rollout, RunEvent

    run = RunFactory(owner=owner, name="r")
    for seq in range(1, 6):
        Rollout.objects.create(run=run, seq=seq, step=seq, reward=seq / 10, rewards={"t": seq / 10})
    for index in range(3):
        RunEvent.objects.create(run=run, kind="queued", message=f"m{index}")
    url = f"/api/runs/{run.pk}/rollouts/"
    first = api.get(url, {"limit": 2}).json()
    assert list(first)[:4] == ["count", "next", "previous", "results"] and first["count"] == 5
    assert first["previous"] is None and [r["seq"] for r in first["results"]] == [1, 2]
    second = api.get(first["next"]).json()
    assert second["count"] == 5 and [r["seq"] for r in second["results"]] == [3, 4]  # the count ignores the cursor
    assert api.get(url, {"min_reward": 0.3}).json()["count"] == 3
    by_reward = api.get(url, {"ordering": "-reward", "limit": 2, "offset": 2}).json()
    assert [r["seq"] for r in by_reward["results"]] == [3, 2] and "offset=0" in by_reward["previous"]
    events = api.get(f"/api/runs/{run.pk}/events/", {"limit": 2}).json()
    assert (events["count"], events["previous"], len(events["results"])) == (3, None, 2)
    assert api.get(events["next"]).json()["count"] == 3
