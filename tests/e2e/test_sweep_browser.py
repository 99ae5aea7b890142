"""The sweep page in headless Chromium: the parallel-coordinates figure drawn from the server's
JSON (one axis per swept parameter and one for the metric), and "Cancel the rest"."""

from __future__ import annotations

import pytest

from tests.support.browser import log_in
from webapp.runs.models import MetricPoint, Run
from webapp.sweeps.services import sweep_create

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_sweep_page_draws_its_figure_and_cancels_the_rest(
    browser, owner, web, echo_env, built_model, settings, frozen_workers
):
    # No worker claims the queued members while the page is looked at: the session's worker,
    # alive from earlier tests, is frozen for this one.
    settings.ENVLAB_MAX_ACTIVE_RUNS = 2
    base = {
        "name": "t", "model": built_model,
        "environments": [{"environment": echo_env.pk, "name": "echo", "prompt": "Echo 'hi'.", "rows": 8}],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        "grpo": {"num_generations": 4, "max_steps": 2, "per_device_train_batch_size": 4},
    }
    sweep = sweep_create(owner=owner, data={
        "name": "<b>lr</b>", "base": base, "grid": {"grpo.learning_rate": [1e-6, 1e-4], "grpo.seed": [0, 1]},
    })
    runs = list(Run.objects.order_by("sweep_member__index"))
    MetricPoint.objects.bulk_create([
        MetricPoint(run=run, step=1, key="reward", value=value, seq=1) for run, value in zip(runs, (0.1, 0.2, 0.3, 0.4), strict=True)
    ])
    page = browser.new_page()
    log_in(page, web, f"/sweeps/{sweep.pk}/")
    page.wait_for_selector('#sweep-chart[data-drawn="1"]', timeout=15_000)
    dimensions = page.evaluate(
        "() => document.getElementById('sweep-chart').data[0].dimensions.map(d => [d.label, d.values])"
    )
    assert [label for label, _ in dimensions] == ["log10 grpo.learning_rate", "grpo.seed", "reward (last)"]
    assert dimensions[1][1] == [0, 1, 0, 1]
    assert dimensions[2][1] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    # The name is text, not markup.
    assert page.locator("h1 b").count() == 0
    assert "<b>lr</b>" in page.inner_text("h1")
    page.click("#cancel-rest-button")
    page.wait_for_selector("#messages")
    assert "Cancelled 2 pending runs; running ones go on." in page.inner_text("#messages")
    assert page.locator("#cancel-rest-button").count() == 0
    assert list(Run.objects.order_by("sweep_member__index").values_list("status", flat=True)) == [
        "queued", "queued", "cancelled", "cancelled",
    ]
    page.close()
    # Withdrawn before the worker wakes (a frozen worker's pending read may hold one of their tasks).
    Run.objects.filter(status=Run.Status.QUEUED).update(status=Run.Status.CANCELLED)
