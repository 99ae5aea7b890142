"""A run trained with a saved reward recipe (a gate tree and the guide's Wordle terms):
real wordle server, real Celery worker training the demo model with TRL, real Redis.
Checked: the run records the recipe's exact version, every leaf gets its own curve, and
each stored rollout's total is the tree's composition of its per-term values."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import metric_steps, register_lab_entry, wait_status
from webapp.rewards.scoring import Episode, recipe_total
from webapp.rewards.terms import RewardTerm
from webapp.runs.models import Rollout, Run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TERMS = [
    {"name": "win", "kind": "success_bonus", "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": 6}},
    {"name": "greens", "kind": "partial_credit", "params": {"attribute": "best_greens", "scale": 0.1}},
    {"name": "invalid", "kind": "penalty", "params": {"attribute": "invalid_moves", "scale": 0.1}},
    {
        "name": "called_then_outcome",
        "kind": "sequential",
        "weight": 0.5,
        "terms": [
            {"name": "called", "kind": "tool_use", "params": {"tool": "guess"}},
            {"name": "some_green", "kind": "gate", "params": {"threshold": 0.1}, "terms": [
                {"name": "green_share", "kind": "expression", "params": {"expression": "best_greens / 5"}},
            ]},
        ],
    },
]  # fmt: skip
LEAVES = ["win", "greens", "invalid", "called_then_outcome", "called", "some_green", "green_share"]


def test_a_recipe_run_logs_every_term_and_its_totals_follow_the_tree(api, wordle_url, worker):
    env_id = register_lab_entry(api, "wordle", wordle_url)
    recipe = api.post(
        "/api/reward-recipes/", {"name": "wordle tree", "terms": TERMS[:3]}, format="json"
    ).json()
    api.put(
        f"/api/reward-recipes/{recipe['id']}/",
        {"name": "wordle tree", "terms": TERMS},
        format="json",
    )
    config = {
        "name": "recipe run",
        "model": "demo:echo",
        "environments": [
            {"environment": env_id, "name": "wordle", "prompt": "Play Wordle with the guess tool.", "rows": 8}
        ],
        "rewards": {"recipe": recipe["id"]},
        "grpo": {
            "num_generations": 4, "max_steps": 2, "per_device_train_batch_size": 4,
            "max_completion_length": 40, "max_tool_calling_iterations": 2, "save_steps": 50,
        },
    }  # fmt: skip
    launched = api.post("/api/runs/", config, format="json")
    assert launched.status_code == 201, launched.json()
    run = wait_status(launched.json()["id"], ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error, run.step) == ("succeeded", "", 2)
    stored = Run.objects.get(pk=run.pk).config["rewards"]
    assert (stored["recipe"], stored["version"], len(stored["terms"])) == (recipe["id"], 2, 4)
    for name in LEAVES:
        assert metric_steps(run.pk, f"rewards/{name}/mean") == [1, 2], name
    terms = [RewardTerm.model_validate(t) for t in TERMS]
    rollouts = list(Rollout.objects.filter(run_id=run.pk))
    assert len(rollouts) == 8
    for rollout in rollouts:
        assert set(rollout.rewards) == set(LEAVES)
        if rollout.unscored:
            continue
        # TRL's total: the top-level terms' weighted sum; inner terms weigh 0.
        top = {t.name: t.weight for t in terms}
        expected = sum(
            w * rollout.rewards[n] for n, w in top.items() if rollout.rewards[n] is not None
        )
        assert rollout.reward == pytest.approx(expected), rollout.rewards
        # ... and the container's own value is the tree over its leaves' values.
        leaves = rollout.rewards
        seq = (
            0.0 if leaves["called"] == 0.0 or leaves["some_green"] == 0.0 else leaves["some_green"]
        )
        assert leaves["called_then_outcome"] == pytest.approx(seq)
        assert leaves["some_green"] == pytest.approx(
            0.0 if leaves["green_share"] < 0.1 else leaves["green_share"]
        )
    assert recipe_total(terms, Episode(attributes={"won": 1.0, "num_guesses": 1.0, "best_greens": 5.0, "invalid_moves": 0.0, "calls_guess": 1.0, "failures_guess": 0.0})) == pytest.approx(
        1 + 0.5 * 5 / 6 + 0.5 * 1.0
    )  # fmt: skip
