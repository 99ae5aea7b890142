"""A reward dry run end to end: a real worker plays groups on the real wordle server and
reports whether the guide's recipe separates episodes: the random policy never wins (every
group the same), the solver wins in a varying number of guesses."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import register_lab_entry, wait_for
from tests.support.browser import log_in
from webapp.jobs.models import Job

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GUIDE = [
    {"name": "win", "kind": "success_bonus",
     "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": "max_guesses"}},
]  # fmt: skip


def _dry_run(api, recipe: int, env_id: int, policy: str) -> dict:
    response = api.post(
        f"/api/reward-recipes/{recipe}/dry-run/",
        {"environment": env_id, "policy": policy, "groups": 6, "group_size": 2, "seed": 3},
        format="json",
    )
    assert response.status_code == 202, response.json()
    job_id = response.json()["id"]
    wait_for(lambda: Job.objects.get(pk=job_id).status in ("succeeded", "failed"), 240, f"dry run {job_id}")
    shown = api.get(f"/api/jobs/{job_id}/").json()
    assert (shown["status"], shown["error"], shown["progress"]["done"]) == ("succeeded", "", 12), shown
    return shown["result"]


def test_random_gives_every_group_one_reward_and_the_solver_a_spread(api, wordle_url, worker):
    env_id = register_lab_entry(api, "wordle", wordle_url)
    recipe = api.post("/api/reward-recipes/", {"name": "guide", "terms": GUIDE}, format="json").json()["id"]

    random_report = _dry_run(api, recipe, env_id, "random")
    assert random_report["zero_variance_fraction"] == 1.0
    assert random_report["total"]["max"] == 0.0
    assert random_report["verdict"].startswith("100 % of groups give every episode the same reward")

    solver = _dry_run(api, recipe, env_id, "solver")
    win = solver["terms"]["win"]
    assert win["count"] == 12 and win["min"] >= 1.0  # every episode won: 1 + 0.5 x (1 - guesses/6)
    assert win["max"] > win["min"]  # in different numbers of guesses on different words
    assert len(solver["total"]["histogram"]["counts"]) == 10


@pytest.mark.browser
def test_the_job_page_follows_the_dry_run_and_draws_its_histograms(api, wordle_url, worker, web, browser):
    env_id = register_lab_entry(api, "wordle", wordle_url)
    recipe = api.post("/api/reward-recipes/", {"name": "guide", "terms": GUIDE}, format="json").json()["id"]
    job_id = api.post(
        f"/api/reward-recipes/{recipe}/dry-run/",
        {"environment": env_id, "policy": "solver", "groups": 4, "group_size": 2, "seed": 3},
        format="json",
    ).json()["id"]
    page = browser.new_page()
    log_in(page, web, f"/jobs/{job_id}/")
    page.wait_for_selector('#job-page[data-status="succeeded"]', timeout=240_000)
    page.wait_for_selector("#histogram-total[data-bins]", timeout=15_000)
    assert page.locator("#job-progress-text").text_content() == "8 / 8"
    # The solver plays a row the same way every time: its groups never spread (its rows do).
    assert page.locator("#dry-run-verdict").text_content() == (
        "100 % of groups give every episode the same reward: GRPO will learn little from this recipe with solver"
    )
    assert page.locator('.term-histogram[data-term="win"][data-bins]').count() == 1  # drawn
    page.close()
