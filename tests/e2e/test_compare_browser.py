"""Compare runs in headless Chromium: tick two runs on the home page, compare them, switch the
metric, and see one trace per run drawn, with a run name shown as text."""

from __future__ import annotations

import pytest

from webapp.runs.models import MetricPoint, Run

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _run(owner, name: str, lr: float) -> Run:
    run = Run.objects.create(
        owner=owner, name=name, config={"grpo": {"learning_rate": lr}}, model="demo:echo", max_steps=3,
        status="succeeded",
    )
    MetricPoint.objects.bulk_create(
        [MetricPoint(run=run, step=s, key=k, value=s * lr * 1e5, seq=s * 2 + i)
         for s in (1, 2, 3) for i, k in enumerate(("reward", "loss"))]
    )
    return run


def test_tick_two_runs_compare_them_and_switch_the_metric(browser, owner, web):
    first = _run(owner, "low-lr", 1e-5)
    second = _run(owner, '<img src=x onerror="window.__xss=1">', 3e-5)
    page = browser.new_page()
    page.goto(f"{web}/login/?next=/")
    page.fill("input[name=username]", "owner")
    page.fill("input[name=password]", "owner-pw")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_selector("#run-table")
    page.check(f'input[name=run][value="{first.pk}"]')
    page.check(f'input[name=run][value="{second.pk}"]')
    page.click("#compare-button")
    page.wait_for_selector('#compare-chart[data-drawn="2"]', timeout=15_000)
    traces = page.evaluate("() => document.getElementById('compare-chart').data.map(t => [t.name, t.y])")
    # The home page lists the newest first, and the chart keeps the order the runs were given in.
    assert [name for name, _ in traces] == [f"#{second.pk} \u2039img src=x onerror=\"window.__xss=1\"\u203a", f"#{first.pk} low-lr"]
    assert [y for _, y in traces] == [pytest.approx([3.0, 6.0, 9.0]), pytest.approx([1.0, 2.0, 3.0])]
    page.select_option("#compare-key", "loss")
    page.wait_for_url("**key=loss**")
    page.wait_for_selector('#compare-chart[data-drawn="2"]', timeout=15_000)
    assert page.evaluate("() => document.getElementById('compare-chart').layout.yaxis.title.text") == "loss"
    assert page.locator('tr.diff-row[data-key="grpo.learning_rate"]').count() == 1
    assert page.evaluate("() => window.__xss") is None
    page.close()
