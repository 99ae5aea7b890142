"""The evaluation page in headless Chromium (Debian's package): the progress bar follows the
database while the evaluation runs, the page shows the table when it ends, the table sorts,
transcripts are text (never HTML), and the checkpoint chart is drawn with the best marked."""

from __future__ import annotations

import pytest

from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.evaluations.models import Evaluation, EvaluationEpisode

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EVIL = '<img src=x onerror="window.__xss=1">'


def _episode(evaluation: Evaluation, model_index: int, reward: float) -> None:
    EvaluationEpisode.objects.create(
        evaluation=evaluation,
        model_index=model_index,
        model=evaluation.model_specs[model_index]["label"],
        index=0,
        seed=7,
        reward=reward,
        won=reward == 1.0,
        tool_calls=1,
        messages=[{"role": "user", "content": "Echo 'x'."}, {"role": "assistant", "content": EVIL}],
    )
    Evaluation.objects.filter(pk=evaluation.pk).update(done=evaluation.played.count())


def test_progress_table_sorting_and_chart(browser, owner, web):
    run = RunFactory(owner=owner, name="trained", config={"model": "demo:echo"}, max_steps=4)
    specs = [
        {
            "spec": {"run": run.pk, "checkpoint": step},
            "label": f"run:{run.pk}@{step}",
            "kind": "model",
            "run": run.pk,
            "step": step,
        }
        for step in (2, 4)
    ]
    evaluation = Evaluation.objects.create(
        owner=owner,
        environment_name="echo",
        environment_key="echo",
        prompt="Echo '{phrase}'.",
        model_specs=specs,
        episodes=1,
        seed=7,
        total=2,
        status="running",
        source_run=run,
    )
    _episode(evaluation, 0, 0.25)

    page = browser.new_page()
    log_in(page, web, f"/evaluations/{evaluation.pk}/")
    page.wait_for_selector("#evaluation-progress")
    assert page.locator("#evaluation-progress-text").inner_text() == "1 / 2 episodes"

    _episode(evaluation, 1, 1.0)
    Evaluation.objects.filter(pk=evaluation.pk).update(status="succeeded")
    # The page polls, sees the end and reloads with the table as stored.
    page.wait_for_selector('#evaluation-page[data-status="succeeded"]', timeout=20_000)
    assert page.locator("#evaluation-progress-text").inner_text() == "2 / 2 episodes"
    first_cells = lambda: page.locator("#results-table tbody tr td:first-child").all_inner_texts()  # noqa: E731
    assert first_cells() == [f"run:{run.pk}@2", f"run:{run.pk}@4"]
    page.click('#results-table th[data-column="mean_reward"] button')
    assert first_cells() == [f"run:{run.pk}@2", f"run:{run.pk}@4"]
    page.click('#results-table th[data-column="mean_reward"] button')
    assert first_cells() == [f"run:{run.pk}@4", f"run:{run.pk}@2"]

    assert page.locator("#episode-list details.episode").count() == 2
    assert EVIL in page.locator("#episode-list").text_content()
    assert page.locator("#episode-list img").count() == 0
    assert page.evaluate("window.__xss") is None

    assert page.locator("#best-checkpoint").inner_text() == "Best: step 4 (mean reward 1)"
    page.wait_for_selector("#checkpoint-chart .main-svg", timeout=20_000)
    assert page.evaluate("document.getElementById('checkpoint-chart').data.length") == 2
    assert page.evaluate("document.getElementById('checkpoint-chart').data[1].x") == [4]
    page.close()
