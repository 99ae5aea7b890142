"""The composer's preview of a freshly played episode end to end: `POST
/api/reward-recipes/preview/` with `play` answers 202, a real worker plays one episode with
wordle's solver on the real wordle server, and `GET /api/jobs/<id>/` holds the same `{total,
values, tree}` a stored rollout's preview gives, the transcript and the attributes."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import register_lab_entry, wait_for
from tests.factories import RunFactory
from webapp.jobs.models import Job
from webapp.runs.models import Rollout

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.sqlite_pass, pytest.mark.django_db(transaction=True)]

# The guide's Wordle recipe; "greens" limited to the run-local name "wordle" (the default
# the job binds: the environment's name slug), "catch_only" to a name this job does not have.
TERMS = [
    {"name": "win", "kind": "success_bonus", "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": 6}},
    {"name": "greens", "kind": "partial_credit", "environments": ["wordle"], "params": {"attribute": "best_greens", "scale": 0.1}},
    {"name": "invalid", "kind": "penalty", "params": {"attribute": "invalid_moves", "scale": 0.1}},
    {"name": "catch_only", "kind": "env_reward", "environments": ["catch"]},
]  # fmt: skip


def test_a_solver_episode_is_played_by_a_worker_and_scored_with_the_tree(api, wordle_url, worker):
    env_id = register_lab_entry(api, "wordle", wordle_url)

    response = api.post(
        "/api/reward-recipes/preview/",
        {"terms": TERMS, "play": {"environment": env_id, "policy": "solver", "seed": 3}},
        format="json",
    )

    assert response.status_code == 202, response.json()
    job_id = response.json()["job"]["id"]
    assert response.json() == {"job": {"id": job_id, "status": "queued"}}
    wait_for(lambda: Job.objects.get(pk=job_id).status in ("succeeded", "failed"), 240, f"preview {job_id}")
    shown = api.get(f"/api/jobs/{job_id}/").json()
    assert (shown["kind"], shown["status"], shown["error"], shown["progress"]["done"]) == ("preview", "succeeded", "", 1), shown
    result = shown["result"]
    # The solver's seeded row: PRISM, found on the third guess (raise, black, prism).
    assert result["episode"] == {
        "env": "wordle", "seed": 1022050301, "policy": "solver", "won": True, "reward": 1.0,
        "tool_calls": 3, "tool_failures": 0, "lost": False, "ended_by": "environment",
    }  # fmt: skip
    guesses = [m["tool_calls"][0]["function"]["arguments"]["guess"] for m in result["messages"] if m.get("tool_calls")]
    assert guesses == ["raise", "black", "prism"]
    assert [m["role"] for m in result["messages"]] == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]
    assert result["messages"][-2]["content"] == "P R I S M\nG G G G G\nYou won in 3 guesses! The word was PRISM."
    assert {k: result["attributes"][k] for k in ("won", "num_guesses", "max_guesses", "best_greens", "invalid_moves")} == {
        "won": 1.0, "num_guesses": 3.0, "max_guesses": 6.0, "best_greens": 5.0, "invalid_moves": 0.0,
    }  # fmt: skip
    # win: 1 + 0.5 x (1 - 3/6); greens: 0 on a win (it applies: the job's name is "wordle");
    # invalid: -0.1 x 0; catch_only: not applicable under "wordle".
    assert result["values"] == {"win": 1.25, "greens": 0.0, "invalid": 0.0, "catch_only": None}
    assert result["total"] == 1.25
    assert [(n["name"], n["applies"], n["value"], n["contribution"]) for n in result["tree"]] == [
        ("win", True, 1.25, 1.25), ("greens", True, 0.0, 0.0), ("invalid", True, 0.0, 0.0), ("catch_only", False, None, None),
    ]  # fmt: skip

    # The same episode stored as a run's rollout gives the same answer from the stored preview:
    # one tree builder for both.
    run = RunFactory(owner=Job.objects.get(pk=job_id).owner, name="r", max_steps=1)
    Rollout.objects.create(run=run, seq=0, step=1, env="wordle", rewards={}, reward=1.25,
                           episode={"attributes": result["attributes"], "components": {}})  # fmt: skip
    stored = api.post("/api/reward-recipes/preview/", {"terms": TERMS, "rollout": {"run": run.pk}}, format="json").json()
    assert {k: stored[k] for k in ("total", "values", "tree")} == {k: result[k] for k in ("total", "values", "tree")}
