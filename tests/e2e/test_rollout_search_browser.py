"""The run page's transcript search in headless Chromium: the controls above the list query
the rollouts API, the matches show in the virtualised list in the chosen order, the search
lives in the page's query string (a reload shows it again) and Clear brings back every step."""

from __future__ import annotations

import pytest

from tests.e2e.test_rollout_list_browser import _ready, _shown
from tests.support.browser import log_in
from webapp.runs.models import Rollout
from webapp.runs.services import run_claim
from webapp.runs.telemetry.record import telemetry_record

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROWS = 300


def _item(seq: int) -> dict:
    failed = seq % 7 == 0
    return {
        "step": 1 + (seq - 1) // 100, "env": "echo", "prompt": [{"role": "user", "content": f"row {seq}"}],
        "messages": [
            {"role": "assistant", "content": f"said {seq}"},
            {"role": "tool", "name": "calc", "content": "{'error': 'bad'}" if failed else "4"},
        ],
        "rewards": {"env_reward": (seq % 10) / 10}, "reward": (seq % 10) / 10, "advantage": 0.0,
    }


@pytest.fixture
def searched_run(owner):
    from tests.factories import RunFactory

    run = RunFactory(owner=owner, name="searched", max_steps=3)
    run_claim(run_id=run.pk, lease_owner="search-test", worker_name="test")
    telemetry_record(
        run_id=run.pk, lease_owner="search-test", events=[("rollouts", [_item(s) for s in range(1, ROWS + 1)])]
    )
    return run


def _search_ready(page, rows: int) -> None:
    page.wait_for_selector(f'#rollouts[data-search-done="true"][data-ready="true"][data-rows="{rows}"]', timeout=15_000)


def test_the_search_filters_orders_survives_a_reload_and_clears(browser, web, searched_run):
    run = searched_run
    # Failed calc calls, highest reward first, ties newest first: what the API orders.
    expected = sorted((s for s in range(1, ROWS + 1) if s % 7 == 0), key=lambda s: (-(s % 10), -s))
    assert Rollout.objects.filter(run=run, tool_failures=1).count() == len(expected) == 42
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    log_in(page, web, f"/runs/{run.pk}/")
    _ready(page, ROWS)
    assert _shown(page)[:2] == [300, 299]

    page.fill("#rollout-tool", "calc")
    page.select_option("#rollout-tool-failed", "true")
    page.select_option("#rollout-ordering", "-reward")
    page.click("#rollout-search button[type=submit]")
    _search_ready(page, len(expected))
    shown = _shown(page)
    assert 5 <= len(shown) < len(expected)  # still a window of the matches
    assert shown == expected[: len(shown)]
    assert page.inner_text("#rollout-search-status") == "42 matches"
    query = page.evaluate("window.location.search")
    assert query == "?tool=calc&tool_failed=true&ordering=-reward"

    page.reload()
    _search_ready(page, len(expected))
    assert _shown(page) == shown
    assert page.input_value("#rollout-tool") == "calc"
    assert page.input_value("#rollout-tool-failed") == "true"
    assert page.input_value("#rollout-ordering") == "-reward"

    # The step filter narrows the same search, and joins the query string.
    page.select_option("#rollout-step-filter", "2")
    step_two = [s for s in expected if 101 <= s <= 200]
    _search_ready(page, len(step_two))
    assert _shown(page) == step_two[: len(_shown(page))]
    assert page.evaluate("window.location.search") == "?tool=calc&tool_failed=true&ordering=-reward&step=2"

    page.click("#rollout-search-clear")
    page.select_option("#rollout-step-filter", "all")
    _ready(page, ROWS)
    assert _shown(page)[:2] == [300, 299]
    assert page.evaluate("window.location.search") == ""
    assert page.inner_text("#rollout-search-status") == ""
    page.close()
