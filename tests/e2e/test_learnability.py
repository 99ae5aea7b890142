"""Learnability end to end: a real worker plays the same seeded rows with the solver and the
random policy on the real wordle server. The guide's recipe (win bonus, partial credit for
greens, a penalty per refused guess) passes reachability, random-stays-low and separation; a
recipe random games (a point for any successful tool call) warns on separation and headroom.
The environment page then shows the newest card per recipe."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import register_lab_entry, wait_for
from tests.support.browser import log_in
from tests.support.recipes import WORDLE_GUIDE
from webapp.jobs.models import Job

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GUIDE = WORDLE_GUIDE
GAMED = [{"name": "called", "kind": "tool_called"}]
EPISODES = 6


def _card(api, recipe: int, env_id: int) -> tuple[int, dict]:
    response = api.post(
        f"/api/reward-recipes/{recipe}/learnability/",
        {"environment": env_id, "episodes": EPISODES, "seed": 3},
        format="json",
    )
    assert response.status_code == 202, response.json()
    job_id = response.json()["id"]
    wait_for(lambda: Job.objects.get(pk=job_id).status in ("succeeded", "failed"), 240, f"learnability {job_id}")
    shown = api.get(f"/api/jobs/{job_id}/").json()
    assert (shown["status"], shown["error"], shown["progress"]["done"]) == ("succeeded", "", 2 * EPISODES), shown
    return job_id, shown["result"]


def test_the_guides_recipe_is_learnable_and_a_gamed_one_warns(api, wordle_url, worker, client, owner):
    env_id = register_lab_entry(api, "wordle", wordle_url)
    guide = api.post("/api/reward-recipes/", {"name": "guide", "terms": GUIDE}, format="json").json()["id"]
    gamed = api.post("/api/reward-recipes/", {"name": "gamed", "terms": GAMED}, format="json").json()["id"]

    guide_job, card = _card(api, guide, env_id)
    assert card["episodes"] == EPISODES
    assert (card["range"]["top"], card["range"]["top_source"]) == (pytest.approx(1 + 0.5 * 5 / 6), "terms")
    statuses = {name: check["status"] for name, check in card["checks"].items()}
    assert statuses["reachability"] == "pass", card["checks"]["reachability"]
    assert statuses["random_low"] == "pass", card["checks"]["random_low"]
    assert statuses["separation"] == "pass", card["checks"]["separation"]
    assert statuses["headroom"] == "pass", card["checks"]["headroom"]
    assert card["solver"]["terms"]["win"]["mean"] >= 1.0  # the solver wins every row
    assert card["random"]["terms"]["win"]["mean"] == 0.0  # random guesses never do
    assert card["checks"]["separation"]["rows_ahead"] == 1.0
    assert sum(card["solver"]["histogram"]["counts"]) == sum(card["random"]["histogram"]["counts"]) == EPISODES

    gamed_job, gamed_card = _card(api, gamed, env_id)
    checks = gamed_card["checks"]
    assert (checks["separation"]["status"], checks["headroom"]["status"]) == ("warn", "warn"), checks
    assert checks["headroom"]["reason"] == "random already reaches 1.00 of the top: little to learn"
    assert gamed_card["verdict"]["status"] == "warn"

    client.force_login(owner)
    page = client.get(f"/environments/{env_id}/").content.decode()
    assert page.count('class="learnability-card"') == 2
    assert f'href="/jobs/{guide_job}/"' in page and f'href="/jobs/{gamed_job}/"' in page
    assert 'data-verdict="pass"' in page and 'data-verdict="warn"' in page
    job_page = client.get(f"/jobs/{guide_job}/").content.decode()
    assert 'id="learnability-job"' in job_page and "Learnability of <em>guide</em> v1" in job_page


@pytest.mark.browser
def test_the_environment_page_form_queues_a_card_and_the_job_page_draws_it(api, wordle_url, worker, web, browser):
    env_id = register_lab_entry(api, "wordle", wordle_url)
    api.post("/api/reward-recipes/", {"name": "guide", "terms": GUIDE}, format="json")
    page = browser.new_page()
    log_in(page, web, f"/environments/{env_id}/")
    page.wait_for_selector("#learnability-none")
    page.fill("#learnability-episodes", "99")  # past the limit: the API's refusal is shown
    page.evaluate("document.getElementById('learnability-episodes').removeAttribute('max')")
    page.click("#learnability-submit")
    page.wait_for_function("document.getElementById('learnability-message').textContent.startsWith('episodes')")
    assert page.locator("#learnability-message").text_content() == "episodes: Input should be less than or equal to 64"
    assert Job.objects.count() == 0
    page.fill("#learnability-episodes", "3")
    page.click("#learnability-submit")
    page.wait_for_selector("#learnability-message a")
    job_id = Job.objects.get().pk
    assert page.locator("#learnability-message").text_content() == (
        f"Queued as job #{job_id}: the card appears here once it has run; follow it")
    page.click("#learnability-message a")
    page.wait_for_selector('#job-page[data-status="succeeded"]', timeout=240_000)
    page.wait_for_selector("#learnability-histogram[data-bins]", timeout=15_000)
    assert page.locator("#learnability-checks tbody tr").count() == 4
    assert page.locator('#learnability-checks tr[data-check="separation"] .badge').text_content() == "pass"
    assert page.locator("#learnability-terms tbody tr").count() == 3
    page.goto(f"{web}/environments/{env_id}/")
    assert page.locator(".learnability-card").count() == 1
    assert page.locator(f'.learnability-card a[href="/jobs/{job_id}/"]').count() == 1
    page.close()
