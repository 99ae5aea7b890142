"""Re-scoring a stored run end to end: a real echo run trained by a real worker (TRL, 2 steps),
re-scored with another recipe by the real worker's "rescore" job; the stored advantages are
recomputed exactly, the new totals follow the recipe, and the run's rows do not change. Then
the pages: the run page's form starts a re-score and the job page shows old and new."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import register_echo, run_config, wait_for, wait_status
from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.jobs.models import Job
from webapp.runs.models import Rollout, Run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# The echo run trains on env_reward + 0.1 x tool_called; the new recipe pays 2 for a
# successful call and takes 0.5 per call made.
RECIPE = [
    {"name": "called", "kind": "tool_called", "weight": 2.0},
    {"name": "calls", "kind": "penalty", "params": {"attribute": "tool_calls", "scale": 0.5}},
]


def _expected_total(episode: dict) -> float:
    attributes = episode["attributes"]
    return 2.0 * (1.0 if attributes["tool_successes"] > 0 else 0.0) - 0.5 * attributes["tool_calls"]


def _wait_job(job_id: int, worker) -> Job:
    def done() -> Job | None:
        job = Job.objects.get(pk=job_id)
        return job if job.status in ("succeeded", "failed") else None

    try:
        return wait_for(done, 180, f"job {job_id}")
    except AssertionError:
        raise AssertionError(worker.log_text()[-6000:]) from None


def test_rescoring_a_trained_run_recomputes_its_advantages_and_leaves_its_rows_unchanged(api, echo_url, worker):
    env_id = register_echo(api, echo_url)
    run_id = api.post("/api/runs/", run_config(env_id, max_steps=2), format="json").json()["id"]
    recipe = api.post("/api/reward-recipes/", {"name": "calls", "terms": RECIPE}, format="json").json()["id"]
    # Not while it trains.
    wait_for(lambda: Run.objects.get(pk=run_id).status in ("running", "succeeded", "failed"), 120, "the run to start")
    if Run.objects.get(pk=run_id).status == "running":
        refused = api.post(f"/api/runs/{run_id}/rescore/", {"recipe": recipe}, format="json")
        assert refused.status_code == 409, refused.json()
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error) == ("succeeded", "")

    before = list(Rollout.objects.filter(run_id=run_id).order_by("seq").values())
    assert len(before) == 2 * 4 and all(r["episode"] and r["advantage"] is not None for r in before)

    response = api.post(f"/api/runs/{run_id}/rescore/", {"recipe": recipe}, format="json")
    assert response.status_code == 202, response.json()
    job = _wait_job(response.json()["id"], worker)
    shown = api.get(f"/api/jobs/{job.pk}/").json()
    assert (shown["kind"], shown["status"], shown["error"]) == ("rescore", "succeeded", ""), shown
    assert shown["progress"] == {"done": 8, "total": 8, "fraction": 1.0}
    result = shown["result"]

    assert (result["rollouts"], result["rescored"], result["not_rescored"]["total"]) == (8, 8, 0)
    assert result["groups"] == {"total": 2, "compared": 2, "sizes": [4]}  # one prompt of 4 per step
    # The stored advantages (TRL's, float32) are our recomputation from the stored totals.
    check = result["old_advantage_check"]
    assert check["compared"] == 8 and check["max_abs_difference"] < 1e-5, check

    # The new totals follow the recipe, computed here by hand from the stored attributes.
    expected = [_expected_total(r["episode"]) for r in before]
    assert result["new"]["total"]["mean"] == pytest.approx(sum(expected) / 8, abs=1e-9)
    assert result["new"]["total"]["min"] == pytest.approx(min(expected), abs=1e-9)
    assert result["new"]["total"]["max"] == pytest.approx(max(expected), abs=1e-9)
    called = [1.0 if r["episode"]["attributes"]["tool_successes"] > 0 else 0.0 for r in before]
    assert result["new"]["terms"]["called"] == {"mean": pytest.approx(sum(called) / 8, abs=1e-9), "count": 8}
    assert result["old"]["total"]["mean"] == pytest.approx(sum(r["reward"] for r in before) / 8, abs=1e-9)
    assert set(result["old"]["terms"]) == {"env_reward", "tool_called"}
    assert sum(result["histogram"]["old"]) == sum(result["histogram"]["new"]) == 8
    assert result["sign_changes"]["count"] == len(result["sign_changes"]["shown"])
    for change in result["sign_changes"]["shown"]:
        stored = next(r for r in before if r["seq"] == change["seq"])
        assert change["old"] == stored["advantage"] and change["old"] * change["new"] < 0

    # The original run's rows never change.
    assert list(Rollout.objects.filter(run_id=run_id).order_by("seq").values()) == before


@pytest.mark.browser
def test_the_run_pages_form_starts_a_rescore_and_the_job_page_shows_old_and_new(api, owner, worker, web, browser):
    """A stored run made here (its rows as the trainer writes them) so the pages are the test."""
    run = RunFactory(owner=owner, name="stored <b>run</b>", config={
        "environments": [{"name": "echo"}], "grpo": {"num_generations": 2},
    }, max_steps=1, status=Run.Status.SUCCEEDED)  # fmt: skip
    # Group 1: the run rewarded the rollout without a tool call; the recipe rewards the call.
    for seq, (reward, successes, advantage) in enumerate([(1.0, 0.0, 0.7070), (0.0, 1.0, -0.7070)], start=1):
        Rollout.objects.create(
            run=run, seq=seq, step=1, env="echo", prompt_key="k", rewards={"env_reward": reward},
            reward=reward, advantage=advantage,
            episode={"attributes": {"reward": reward, "tool_calls": successes, "tool_successes": successes},
                     "components": {}, "completion_tokens": 5, "completion_chars": 20},
        )  # fmt: skip
    api.post("/api/reward-recipes/", {"name": "<i>calls</i>", "terms": RECIPE[:1]}, format="json")
    before = list(Rollout.objects.filter(run=run).order_by("seq").values())

    page = browser.new_page()
    log_in(page, web, f"/runs/{run.pk}/")
    page.wait_for_selector('#rescore-form[data-ready="true"]', timeout=15_000)
    assert page.locator("#rescore-recipe option").all_text_contents() == ["<i>calls</i> (v1)"]  # text, not markup
    page.click("#rescore-button")
    page.wait_for_url(f"{web}/jobs/*/", timeout=15_000)
    page.wait_for_selector('#job-page[data-status="succeeded"]', timeout=120_000)
    page.wait_for_selector("#rescore-histogram[data-bins]", timeout=15_000)
    assert page.locator("#job-page h1").text_content() == f"#{Job.objects.get().pk} Re-score of run #{run.pk} with <i>calls</i> v1"
    assert page.locator("#rescore-rescored").text_content() == "2 of 2"
    assert page.locator('#rescore-compare tr[data-row="zero"] td[data-side="old"]').text_content() == "0 % (0)"
    # Both advantages flip: each links to its replay.
    links = page.locator("#rescore-signs tr.sign-change a")
    assert links.all_text_contents() == ["#1", "#2"]
    assert [links.nth(i).get_attribute("href") for i in range(2)] == [
        f"/replay/runs/{run.pk}/1/", f"/replay/runs/{run.pk}/2/",
    ]
    assert page.locator('#rescore-terms tr[data-side="new"][data-term="called"] td').all_text_contents() == [
        "called", "new", "0.5000", "2",
    ]
    assert page.locator("#rescore-result b, #rescore-result i, h1 i").count() == 0
    page.close()
    assert list(Rollout.objects.filter(run=run).order_by("seq").values()) == before
