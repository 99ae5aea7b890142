"""The run page's metric picker in headless Chromium (Debian's package): during a live
run, add a chart of a key no fixed chart shows and watch it gain points; smooth it, put
it on a log scale and on a wall-time axis; reload and find the layout kept. Telemetry
flows through the real sink, database, Redis and ASGI server."""

from __future__ import annotations

import itertools
import math
import threading
from typing import Any

import pytest

from tests.e2e.helpers import wait_for
from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.accounts.models import RunChartLayout
from webapp.runs.models import MetricPoint
from webapp.runs.services import run_claim
from webapp.runs.telemetry.metric_keys import WALL_TIME_KEY
from worker.training.telemetry import TelemetrySink

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EVIL_KEY = 'rewards/<img src=x onerror="window.__xss=1">/mean'


def _grad_norm(step: int) -> float:
    return float(step * step)


def _push(run_id: int, steps: range, extra: dict[str, float] | None = None) -> None:
    """Telemetry from another thread, as the trainer's would be (the sink adds each step's
    wall time)."""
    sink = TelemetrySink(run_id=run_id, lease_owner="browser-test", heartbeat_seconds=0.5)
    for step in steps:
        sink.metrics(
            step,
            {
                "reward": step / 10,
                "loss": 0.5,
                "grad_norm": _grad_norm(step),
                "frac_reward_zero_std": 0.25,
                **(extra or {}),
            },
        )
    sink.close(timeout=20)


def _push_in_thread(run_id: int, steps: range, extra: dict[str, float] | None = None) -> None:
    thread = threading.Thread(target=_push, args=(run_id, steps, extra))
    thread.start()
    thread.join()


def _ema(values: list[float], weight: float, *, span: int = 20) -> list[float]:
    """webapp/static/js/run_charts.js's smoothing of values logged at steps 1, 2, ...: an exponential
    moving average weighted by step distance (weight^(distance * 100 / span) per gap), of the
    series drawn as straight lines between its points, starting at the first value."""
    out = [values[0]]
    for previous, value in itertools.pairwise(values):
        decay = weight ** (100 / span)
        ramp = 1 - (1 - decay) / -math.log(decay)
        out.append(decay * out[-1] + (1 - decay) * previous + ramp * (value - previous))
    return out


def _plot(page, selector: str) -> dict:
    """The Plotly figure the page drew in a chart: traces' x, y, visibility, opacity and
    the axes' types."""
    return page.eval_on_selector(
        f"{selector} .chart-plot",
        """div => ({
            data: div.data.map(t => ({x: Array.from(t.x), y: Array.from(t.y), name: t.name,
                                      visible: t.visible, opacity: t.opacity})),
            xaxis: div.layout.xaxis.type, yaxis: div.layout.yaxis.type,
        })""",
    )


def _live_run_page(browser, owner, web: str, name: str, steps: range) -> tuple[Any, Any]:
    """A run `name` held by a worker, as training has it, with `steps` logged (in a thread),
    and a signed-in page on it once the page is live."""
    run = RunFactory(owner=owner, name=name, config={"model": "demo:echo"}, max_steps=20)
    run_claim(run_id=run.pk, lease_owner="browser-test", worker_name="test")
    _push_in_thread(run.pk, steps)
    page = browser.new_page()
    log_in(page, web, f"/runs/{run.pk}/")
    page.wait_for_selector('#run-page[data-live="live"]', timeout=20_000)
    return run, page


def _wait_saved(page) -> None:
    page.wait_for_selector(
        '#chart-layout-state[data-state="saved"]', state="attached", timeout=10_000
    )


def test_add_a_chart_from_the_picker_smooth_it_and_keep_the_layout(browser, owner, web):
    run, page = _live_run_page(browser, owner, web, "picker", range(1, 3))

    # The picker lists every key the run logged, by prefix, never the lab's own "_" keys.
    page.click("#metric-picker > summary")
    offered = page.eval_on_selector_all(".metric-option", "els => els.map(e => e.dataset.key)")
    assert offered == ["frac_reward_zero_std", "grad_norm", "loss", "reward"]
    assert (
        page.locator('.metric-group[data-prefix=""] .metric-group-title').inner_text()
        == "top level"
    )

    page.click('.metric-option[data-key="grad_norm"]')
    chart = '.chart[data-metric="grad_norm"]'
    page.wait_for_selector(f'{chart}[data-points="2"]', timeout=10_000)
    assert page.locator('.metric-option[data-key="grad_norm"]').is_disabled()

    # Steps arrive while the page is open: the added chart gains them.
    _push_in_thread(run.pk, range(3, 6))
    page.wait_for_selector(f'{chart}[data-points="5"]', timeout=10_000)
    raw = [_grad_norm(step) for step in range(1, 6)]
    figure = _plot(page, chart)
    assert figure["data"][0]["x"] == [1, 2, 3, 4, 5]
    assert figure["data"][0]["y"] == raw
    assert (figure["data"][0]["opacity"], figure["data"][1]["visible"]) == (1, False)

    # The smoothing slider: a smoothed trace over the raw one, which turns faint.
    page.fill(f"{chart} .chart-smoothing", "0.9")
    page.wait_for_selector(f'{chart}[data-smoothing="0.90"]', timeout=5_000)
    figure = _plot(page, chart)
    assert figure["data"][0]["y"] == raw
    assert figure["data"][1]["y"] == pytest.approx(_ema(raw, 0.9))
    assert figure["data"][1]["y"] != raw
    assert (figure["data"][0]["opacity"], figure["data"][1]["visible"]) == (0.25, True)
    assert page.locator(f"{chart} .chart-smoothing-value").inner_text() == "0.90"

    # Smoothing applies to points arriving live too.
    _push_in_thread(run.pk, range(6, 8))
    page.wait_for_selector(f'{chart}[data-points="7"]', timeout=10_000)
    raw = [_grad_norm(step) for step in range(1, 8)]
    assert _plot(page, chart)["data"][1]["y"] == pytest.approx(_ema(raw, 0.9))

    # Log scale, then the wall-time axis: x becomes each step's stored wall time.
    page.check(f"{chart} .chart-log")
    page.select_option(f"{chart} .chart-x", "wall_time")
    page.wait_for_selector(f'{chart}[data-log="true"][data-x="wall_time"]', timeout=5_000)
    figure = _plot(page, chart)
    walls = dict(
        MetricPoint.objects.filter(run=run, key=WALL_TIME_KEY).values_list("step", "value")
    )
    assert sorted(walls) == list(range(1, 8))
    assert (figure["xaxis"], figure["yaxis"]) == ("date", "log")
    assert figure["data"][0]["x"] == pytest.approx([walls[step] * 1000 for step in range(1, 8)])
    assert figure["data"][0]["y"] == raw

    # Saved for this user, whole, and applied again after a reload.
    _wait_saved(page)
    assert RunChartLayout.objects.get(user=owner).layout == {
        "metrics": ["grad_norm"],
        "settings": {"metric:grad_norm": {"smoothing": 0.9, "log_y": True, "x": "wall_time"}},
    }
    page.reload()
    page.wait_for_selector('#run-page[data-live="live"]', timeout=20_000)
    page.wait_for_selector(
        f'{chart}[data-points="7"][data-smoothing="0.90"][data-log="true"][data-x="wall_time"]',
        timeout=10_000,
    )
    figure = _plot(page, chart)
    assert (figure["xaxis"], figure["yaxis"]) == ("date", "log")
    assert figure["data"][1]["y"] == pytest.approx(_ema(raw, 0.9))
    assert page.locator(f"{chart} .chart-smoothing").input_value() == "0.9"
    assert page.locator(f"{chart} .chart-log").is_checked()
    assert page.locator(f"{chart} .chart-x").input_value() == "wall_time"
    # The fixed charts are untouched.
    assert (
        page.locator('#chart-reward[data-points="7"][data-smoothing="0.00"][data-x="step"]').count()
        == 1
    )
    page.close()


def test_picker_learns_live_keys_shows_them_as_text_and_removes_charts(browser, owner, web):
    run, page = _live_run_page(browser, owner, web, "live keys", range(1, 2))
    page.click("#metric-picker > summary")
    page.wait_for_selector('.metric-option[data-key="grad_norm"]')
    assert page.locator(".metric-option[data-key^='rewards/']").count() == 0

    # A key first logged at step 2, with markup in it: offered, as text, under its prefix.
    _push_in_thread(run.pk, range(2, 4), extra={EVIL_KEY: 0.5})
    option = page.locator(".metric-option[data-key^='rewards/']")
    option.wait_for(timeout=10_000)
    assert option.get_attribute("data-key") == EVIL_KEY
    assert option.inner_text() == EVIL_KEY.removeprefix("rewards/")
    assert page.locator('.metric-group[data-prefix="rewards/"]').count() == 1

    option.click()
    added = page.locator(".chart-metric")
    wait_for(lambda: added.get_attribute("data-points") == "2", 10, "the added chart's points")
    assert added.get_attribute("data-metric") == EVIL_KEY
    # Plotly shows the key as text (no element made from it); nothing ran.
    assert page.locator(".chart-metric .chart-plot img").count() == 0
    assert EVIL_KEY in page.locator(".chart-metric .gtitle").text_content()
    assert page.evaluate("window.__xss") is None
    _wait_saved(page)
    assert RunChartLayout.objects.get(user=owner).layout == {"metrics": [EVIL_KEY], "settings": {}}

    # The page's helpers, in the browser: step -> wall time between and beyond known steps.
    assert page.evaluate(
        """() => {
            const clock = new EnvlabCharts.WallClock();
            clock.replace([[10, 200], [0, 100]]);
            return [clock.at(5), clock.at(-1), clock.at(20), clock.at(10)];
        }"""
    ) == [150, 100, 200, 200]
    assert page.evaluate("EnvlabCharts.ema([1, 2, 5], [2, 2, 2], 0.6, 100)") == pytest.approx([2, 2, 2])

    page.click(".chart-metric .chart-remove")
    _wait_saved(page)
    assert page.locator(".chart-metric").count() == 0
    assert not option.is_disabled()
    assert RunChartLayout.objects.get(user=owner).layout == {"metrics": [], "settings": {}}
    page.close()
