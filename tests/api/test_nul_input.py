"""A NUL character in any text of a request is refused with a 400 naming where it is, and
nothing is written (PostgreSQL stores no NUL in text or JSON: it used to be a 500 there)."""

from __future__ import annotations

import pytest

from webapp.core.textcheck import MESSAGE, nul_path
from webapp.evaluations.models import Evaluation
from webapp.jobs.models import Job
from webapp.rewards.models import RewardRecipe
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


def test_nul_path_names_the_first_place() -> None:
    assert nul_path({"a": [{"b": "ok"}, {"c": "x\x00"}]}) == "a.1.c"
    assert nul_path({"a\x00": 1}) == "non_field_errors"
    assert nul_path({"a": {"b\x00": 1}}) == "a"
    assert nul_path({"a": ["fine", 3, None]}) is None


def test_every_json_edge_refuses_a_nul(api) -> None:
    run = api.post("/api/runs/", {
        "name": "r", "model": "demo:echo",
        "environments": [{"environment": 1, "name": "echo", "prompt": "Echo\x00 'x'."}],
    }, format="json")
    assert (run.status_code, run.json()) == (400, {"environments.0.prompt": [MESSAGE]})
    evaluation = api.post("/api/evaluations/", {"environment": 1, "models": ["solver"], "episodes": 1,
                                                "prompt": "\x00"}, format="json")
    assert (evaluation.status_code, evaluation.json()) == (400, {"prompt": [MESSAGE]})
    recipe = api.post("/api/reward-recipes/", {"name": "r\x00", "terms": [{"name": "e", "kind": "env_reward"}]},
                      format="json")
    assert (recipe.status_code, recipe.json()) == (400, {"name": [MESSAGE]})
    created = api.post("/api/reward-recipes/", {"name": "r", "terms": [{"name": "e", "kind": "env_reward"}]}, format="json")
    recipe_id = created.json()["id"]
    for path in ("dry-run", "learnability"):
        response = api.post(f"/api/reward-recipes/{recipe_id}/{path}/", {"environment": 1, "prompt": "a\x00b"},
                            format="json")
        assert (response.status_code, response.json()) == (400, {"prompt": [MESSAGE]}), path
    assert (Run.objects.count(), Evaluation.objects.count(), Job.objects.count()) == (0, 0, 0)
    assert list(RewardRecipe.objects.values_list("name", flat=True)) == ["r"]
