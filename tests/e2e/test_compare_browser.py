"""Compare runs in headless Chromium: tick two runs on the home page, compare them, switch the
metric, and see one trace per run drawn, with a run name shown as text."""

from __future__ import annotations

import pytest

from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.runs.models import MetricPoint, Run

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _run(owner, name: str, lr: float) -> Run:
    run = RunFactory(
        owner=owner, name=name, config={"grpo": {"learning_rate": lr}}, status="succeeded",
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
    log_in(page, web, "/")
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


def _seed(owner, name: str, lr: float, seed: int, group: str) -> Run:
    run = RunFactory(
        owner=owner,
        name=name,
        config={"grpo": {"learning_rate": lr, "seed": seed}},
        max_steps=100,
        status="succeeded",
        group=group,
    )
    MetricPoint.objects.bulk_create(
        [MetricPoint(run=run, step=s, key="reward", value=s * lr * 1e5 + seed, seq=s) for s in (1, 2, 3)]
    )
    return run


def test_grouped_compare_draws_a_band_per_group_and_keeps_the_smoothing_across_a_reload(browser, owner, web):
    runs = [_seed(owner, f"{lr}-{seed}", lr, seed, "") for lr in (1e-5, 3e-5) for seed in (0, 1, 2)]
    page = browser.new_page()
    log_in(page, web, "/")
    page.wait_for_selector("#run-table")
    query = "&".join(f"run={run.pk}" for run in runs) + "&key=reward&group_by=config.grpo.learning_rate"
    page.goto(f"{web}/runs/compare/?{query}")
    page.wait_for_selector('#compare-chart[data-drawn="6"][data-bands="2"][data-smoothing="0.00"]', timeout=15_000)
    roles = page.evaluate(
        "() => document.getElementById('compare-chart').data.map(t => [t.meta.group, t.meta.role, t.y])"
    )
    # Mean over seeds 0, 1, 2 of step * lr * 1e5 + seed: step * lr * 1e5 + 1; the band min-max +-1.
    assert roles == [
        ["1e-05", "band-lower", pytest.approx([1.0, 2.0, 3.0])],
        ["1e-05", "band-upper", pytest.approx([3.0, 4.0, 5.0])],
        ["1e-05", "mean", pytest.approx([2.0, 3.0, 4.0])],
        ["3e-05", "band-lower", pytest.approx([3.0, 6.0, 9.0])],
        ["3e-05", "band-upper", pytest.approx([5.0, 8.0, 11.0])],
        ["3e-05", "mean", pytest.approx([4.0, 7.0, 10.0])],
    ]
    assert page.locator("#compare-chart .scatterlayer .trace path.js-fill").count() == 2

    page.fill("#compare-controls .chart-smoothing", "0.9")
    page.wait_for_selector('#compare-chart[data-smoothing="0.90"]', timeout=5_000)
    page.wait_for_url("**smoothing=0.90**")
    smoothed = page.evaluate("() => document.getElementById('compare-chart').data[2].y")
    # Smoothing is step-weighted: the first point is its own, later ones lag the raw mean.
    assert smoothed[0] == pytest.approx(2.0) and 2.0 < smoothed[2] < 4.0

    page.reload()
    page.wait_for_selector('#compare-chart[data-drawn="6"][data-bands="2"][data-smoothing="0.90"]', timeout=15_000)
    assert page.locator("#compare-controls .chart-smoothing").input_value() == "0.9"
    assert page.evaluate("() => document.getElementById('compare-chart').data[2].y") == pytest.approx(smoothed)
    # The band switch (a form field) keeps the smoothing too.
    page.select_option("#compare-band", "std")
    page.wait_for_url("**band=std**")
    page.wait_for_selector('#compare-chart[data-bands="2"][data-smoothing="0.90"]', timeout=15_000)
    page.close()


def test_the_smoothing_is_weighted_by_step_distance(browser):
    """The same slider value gives the same curve whether a run logged every step or every tenth,
    and on a 100-step run as on a 100k-step one (at the same share of the run)."""
    from pathlib import Path

    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(path=str(Path(__file__).resolve().parents[2] / "webapp" / "static" / "js" / "run_charts.js"))
    gaps, long_run, short_run = page.evaluate(
        """() => {
            const f = (s) => 1 - Math.exp(-s / 200) + 0.3 * Math.sin(s / 60);
            const C = EnvlabCharts;
            const dense = Array.from({length: 1000}, (_, i) => i + 1);
            const sparse = dense.filter((s) => s === 1 || s % 10 === 0);
            const gaps = [0.6, 0.9, 0.99].map((w) => {
                const a = C.ema(dense, dense.map(f), w, 1000);
                const b = C.ema(sparse, sparse.map(f), w, 1000);
                return Math.max(...sparse.map((s, i) => Math.abs(a[s - 1] - b[i])));
            });
            const long = Array.from({length: 100}, (_, i) => (i + 1) * 1000);
            const short = Array.from({length: 100}, (_, i) => i + 1);
            return [
                gaps,
                C.ema(long, long.map((s) => f(s / 100)), 0.8, 100000),
                C.ema(short, short.map((s) => f(s * 10)), 0.8, 100),
            ];
        }"""
    )
    # Logged every step or every tenth (from step 1), at the steps both logged: at most 0.001 apart
    # on a curve spanning about 1.5 (0.0008, 0.0005, 0.0001 measured).
    assert max(gaps) < 1e-3, gaps
    assert long_run == pytest.approx(short_run, abs=1e-12)
    assert long_run[0] == pytest.approx(0.0985394, abs=1e-6) and long_run[1] < 0.19
    # Weight 0 is the raw series.
    assert page.evaluate("EnvlabCharts.ema([1, 5, 9], [3, 1, 2], 0, 10)") == [3, 1, 2]
    page.close()


def test_ungrouped_runs_plot_against_wall_time_and_keep_it_in_the_url(browser, owner, web):
    from webapp.runs.telemetry.metric_keys import WALL_TIME_KEY

    first = _run(owner, "a", 1e-5)
    second = _run(owner, "b", 3e-5)
    for run, start in ((first, 1_700_000_000.0), (second, 1_700_000_100.0)):
        MetricPoint.objects.bulk_create(
            [MetricPoint(run=run, step=s, key=WALL_TIME_KEY, value=start + 10 * s, seq=100 + s) for s in (1, 2, 3)]
        )
    page = browser.new_page()
    log_in(page, web, "/")
    page.wait_for_selector("#run-table")
    page.goto(f"{web}/runs/compare/?run={first.pk}&run={second.pk}&key=reward")
    page.wait_for_selector('#compare-chart[data-drawn="2"][data-x="step"]', timeout=15_000)

    page.select_option("#compare-controls .chart-x", "wall_time")
    page.wait_for_selector('#compare-chart[data-x="wall_time"]', timeout=5_000)
    page.wait_for_url("**x=wall_time**")
    page.reload()
    page.wait_for_selector('#compare-chart[data-drawn="2"][data-x="wall_time"]', timeout=15_000)
    xs = page.evaluate("() => document.getElementById('compare-chart').data.map(t => Array.from(t.x))")
    assert xs == [
        [(1_700_000_000.0 + 10 * s) * 1000 for s in (1, 2, 3)],
        [(1_700_000_100.0 + 10 * s) * 1000 for s in (1, 2, 3)],
    ]
    assert page.evaluate("() => document.getElementById('compare-chart').layout.xaxis.type") == "date"
    # Grouped, a mean has no one wall time: the x choice is not offered.
    page.goto(f"{web}/runs/compare/?run={first.pk}&run={second.pk}&key=reward&group_by=config.grpo.learning_rate&x=wall_time")
    page.wait_for_selector('#compare-chart[data-bands="2"][data-x="step"]', timeout=15_000)
    assert page.locator("#compare-controls .chart-x").count() == 0
    page.close()


def test_a_grouped_chart_follows_a_run_that_trains(browser, owner, web):
    runs = [_seed(owner, f"s{seed}", 1e-5, seed, "") for seed in (0, 1)]
    Run.objects.filter(pk=runs[1].pk).update(status="running")
    page = browser.new_page()
    page.add_init_script("window.ENVLAB_COMPARE_POLL_MS = 300")
    log_in(page, web, "/")
    page.wait_for_selector("#run-table")
    page.goto(f"{web}/runs/compare/?run={runs[0].pk}&run={runs[1].pk}&key=reward&group_by=group")
    page.wait_for_selector('#compare-chart[data-bands="1"]', timeout=15_000)

    MetricPoint.objects.create(run=runs[1], step=4, key="reward", value=9.0, seq=4)
    page.wait_for_function(
        "() => Array.from(document.getElementById('compare-chart').data[2].x).length === 4", timeout=10_000
    )
    mean = page.evaluate("() => [Array.from(document.getElementById('compare-chart').data[2].x), document.getElementById('compare-chart').data[2].y]")
    # Step 4 is the running run's alone.
    assert mean == [[1, 2, 3, 4], pytest.approx([1.5, 2.5, 3.5, 9.0])]
    page.close()
