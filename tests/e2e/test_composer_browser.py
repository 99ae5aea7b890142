"""The reward composer in headless Chromium: build the guide's three-term Wordle recipe through
the page (add terms, choose kinds, fill params, reorder, remove), see a live validation error
appear beside its row for a bad param and go when it is fixed, save, start a dry run with the
solver on the real wordle server played by a real worker, and see the job page's histogram.
An unsaved draft previewed on a freshly played episode: the worker plays it, the tree and the
transcript appear in the preview panel."""

from __future__ import annotations

import re

import pytest

from tests.e2e.helpers import register_lab_entry
from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.jobs.models import Job
from webapp.rewards.models import RewardRecipe
from webapp.runs.models import Rollout

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _row(index: int) -> str:
    return f'#term-tree > li.term[data-path="terms.{index}"]'


def _new_recipe(browser, web):
    """A signed-in page on the composer of a new recipe, once the composer is ready."""
    page = browser.new_page()
    log_in(page, web, "/rewards/new/")
    page.wait_for_selector("#composer-page[data-mode=new]")
    return page


def _add_term(page, index: int, kind: str, name: str, params: dict[str, str]) -> None:
    page.click("#add-term")
    page.wait_for_selector(_row(index))
    page.select_option(f"{_row(index)} .term-kind", kind)
    page.wait_for_selector(f'{_row(index)}[data-kind="{kind}"]')
    page.fill(f"{_row(index)} .term-name", name)
    for param, value in params.items():
        page.fill(f'{_row(index)} .param-input[data-param="{param}"]', value)


@pytest.mark.slow
def test_compose_the_wordle_recipe_save_it_dry_run_it_and_see_the_histogram(api, wordle_url, worker, web, browser):
    env_id = register_lab_entry(api, "wordle", wordle_url)
    page = _new_recipe(browser, web)

    page.fill("#recipe-name", "wordle three terms")
    _add_term(page, 0, "success_bonus", "win", {"speed_bonus": "0.5", "steps": "num_guesses", "max_steps": "6"})
    _add_term(page, 1, "partial_credit", "greens", {"attribute": "best_greens", "scale": "0.1"})
    # A scale past the registry's bound: the check a save makes flags it beside this row.
    _add_term(page, 2, "penalty", "invalid", {"attribute": "invalid_moves", "scale": "5000"})
    error = f"{_row(2)} > .term-errors > li"
    page.wait_for_selector(error, timeout=10_000)
    assert page.locator(error).all_text_contents() == ["params.scale: penalty: Input should be less than or equal to 1000"]
    assert page.locator(f'{_row(2)} .param[data-param="scale"].has-error').count() == 1
    assert page.locator("#term-tree .term-errors > li").count() == 1  # only that row
    assert page.locator("#validation-status").text_content() == "1 problem"
    page.fill(f'{_row(2)} .param-input[data-param="scale"]', "0.1")
    page.wait_for_selector('#validation-status[data-state="ok"]', timeout=10_000)
    assert page.locator("#term-tree .term-errors > li").count() == 0
    # The attribute params offer the registered wordle environment's attributes.
    assert page.locator(f'{_row(2)} datalist option[value="invalid_moves"]').count() == 1

    # A fourth term moved up above "invalid", then removed again.
    page.click("#add-term")
    page.wait_for_selector(_row(3))
    page.click(f"{_row(3)} .term-up")
    assert page.eval_on_selector_all("#term-tree > li .term-name", "els => els.map(e => e.value)") == [
        "win", "greens", "env_reward", "invalid",
    ]  # fmt: skip
    page.click(f"{_row(2)} .term-remove")
    page.wait_for_selector('#validation-status[data-state="ok"]', timeout=10_000)

    page.click("#save-recipe")
    page.wait_for_url(re.compile(r"/rewards/[0-9]+/$"), timeout=10_000)
    recipe = RewardRecipe.objects.get()
    assert page.url == f"{web}/rewards/{recipe.pk}/"
    assert recipe.versions.get().terms == [
        {"name": "win", "kind": "success_bonus", "weight": 1.0, "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": 6}},
        {"name": "greens", "kind": "partial_credit", "weight": 1.0, "params": {"attribute": "best_greens", "scale": 0.1}},
        {"name": "invalid", "kind": "penalty", "weight": 1.0, "params": {"attribute": "invalid_moves", "scale": 0.1}},
    ]  # fmt: skip
    assert page.locator("#recipe-versions .version-item").all_text_contents()[0].split()[0] == "v1"

    page.select_option("#dry-run-environment", str(env_id))
    page.select_option("#dry-run-policy", "solver")
    page.fill("#dry-run-groups", "2")
    page.fill("#dry-run-group-size", "2")
    page.click("#dry-run-submit")
    page.wait_for_url(re.compile(r"/jobs/[0-9]+/$"), timeout=10_000)
    page.wait_for_selector('#job-page[data-status="succeeded"]', timeout=240_000)
    page.wait_for_selector("#histogram-total.js-plotly-plot[data-bins]", timeout=15_000)
    assert page.locator("#job-progress-text").text_content() == "4 / 4"
    assert page.locator(".term-histogram[data-bins]").count() == 3  # win, greens, invalid
    page.close()


def test_preview_scores_a_stored_rollout_with_the_draft_and_shows_the_tree_as_text(api, owner, web, browser):
    terms = [
        {"name": "win", "kind": "success_bonus", "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": 6}},
        {"name": "invalid", "kind": "penalty", "params": {"attribute": "invalid_moves", "scale": 0.1}},
    ]  # fmt: skip
    recipe = api.post("/api/reward-recipes/", {"name": "two terms", "terms": terms}, format="json").json()["id"]
    run = RunFactory(
        owner=owner, name='<img src=x onerror="window.__xss=1">', max_steps=1, status="succeeded",
    )
    Rollout.objects.create(
        run=run, seq=3, step=1, env="<b>wordle</b>", rewards={}, reward=1.0,
        episode={"attributes": {"won": 1.0, "num_guesses": 3.0, "invalid_moves": 2.0}, "components": {}},
    )  # fmt: skip
    page = browser.new_page()
    log_in(page, web, f"/rewards/{recipe}/")
    page.wait_for_selector("#composer-page[data-mode=edit]")
    page.wait_for_selector('#validation-status[data-state="ok"]', timeout=10_000)  # the saved version checks out
    # The draft, not the saved version, is what is scored: the penalty's scale changed here.
    page.fill('#term-tree > li.term[data-path="terms.1"] .param-input[data-param="scale"]', "0.5")
    page.select_option("#preview-run", str(run.pk))
    page.fill("#preview-seq", "3")
    page.click("#preview-button")
    page.wait_for_selector("#preview-result:not([hidden])", timeout=10_000)
    assert page.get_attribute("#preview-result", "data-total") == "0.25"  # 1.25 - 0.5 x 2
    assert page.locator("#preview-tree .preview-node").all_text_contents() == [
        "win success_bonus 1.25 — 1 × 1.25 = 1.25",
        "invalid penalty -1 — 1 × -1 = -1",
    ]
    assert page.locator("#preview-summary").text_content().startswith(f"Run {run.pk}, rollout 3 (step 1, <b>wordle</b>): total 0.25")
    assert page.locator("#preview-run option").all_text_contents() == [f'#{run.pk} <img src=x onerror="window.__xss=1">']
    assert page.evaluate("() => window.__xss") is None
    page.close()


@pytest.mark.slow
def test_play_a_fresh_episode_with_an_unsaved_draft_and_see_its_tree_and_transcript(api, wordle_url, worker, web, browser):
    env_id = register_lab_entry(api, "wordle", wordle_url)
    page = _new_recipe(browser, web)
    _add_term(page, 0, "success_bonus", "win", {"speed_bonus": "0.5", "steps": "num_guesses", "max_steps": "6"})
    # Limited to the run-local name given below, and to a name shown as text, never as markup.
    mine, elsewhere = "my-wordle", '<img src=x onerror="window.__xss=1">'
    _add_term(page, 1, "env_reward", "mine", {})
    page.fill(f"{_row(1)} .term-environments", mine)
    _add_term(page, 2, "tool_called", "elsewhere", {})
    page.fill(f"{_row(2)} .term-environments", elsewhere)
    page.select_option("#fresh-environment", str(env_id))
    page.select_option("#fresh-policy", "solver")
    page.fill("#fresh-seed", "3")
    page.fill("#fresh-name", mine)

    page.click("#fresh-episode")
    page.wait_for_selector("#fresh-episode-link:not([hidden])", timeout=10_000)
    job = Job.objects.get()
    assert (job.kind, job.params["name"], job.params["seed"]) == ("preview", mine, 3)
    assert page.get_attribute("#fresh-episode-link", "href") == f"/jobs/{job.pk}/"
    page.wait_for_selector('#preview-result[data-source="fresh"]:not([hidden])', timeout=240_000)

    # The solver finds PRISM on the third guess: 1 + 0.5 x (1 - 3/6) and the env's reward 1.
    assert page.get_attribute("#preview-result", "data-total") == "2.25"
    assert page.locator("#preview-tree .preview-node").all_text_contents() == [
        "win success_bonus 1.25 — 1 × 1.25 = 1.25",
        "mine env_reward 1 — 1 × 1 = 1",
        f"elsewhere tool_called — — not applied here (only on {elsewhere})",
    ]
    assert page.locator("#preview-summary").text_content() == (
        f"Fresh episode (job #{job.pk}, {mine}, seed 1022050301, solver, won): total 2.25 = the sum of "
        "weight × score over the top-level terms; the environment's reward 1."
    )
    assert page.locator("#preview-transcript[open]:not([hidden])").count() == 1
    lines = page.locator("#preview-messages > li").all_text_contents()
    assert len(lines) == 8 and lines[0].startswith("user: Play Wordle: find the secret five-letter word")
    assert lines[1:3] == ['assistant: → guess({"guess":"raise"})', "tool (guess): R A I S E\nY X G G X\n5 guesses left."]
    assert lines[-1] == "assistant: I found the word."
    assert page.evaluate("() => window.__xss") is None
    page.click("#fresh-episode-link")
    page.wait_for_selector("#preview-job-note", timeout=10_000)
    assert page.locator("#preview-job-note").text_content().startswith("One fresh episode on wordle (as my-wordle), policy solver, seed 3")
    page.close()
