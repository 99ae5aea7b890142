"""During an SFT warm-up the run page says its steps are the warm-up's and hides the GRPO ETA
(headless Chromium: the rule is CSS on the live phase)."""

from __future__ import annotations

import pytest

from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CONFIG = {"warmup": {"kind": "sft", "source": "solver"}, "grpo": {"max_steps": 8}}


def _open(browser, web: str, run: Run):
    page = browser.new_page()
    log_in(page, web, f"/runs/{run.pk}/")
    page.wait_for_selector("#run-page")
    return page


def test_the_warm_up_says_whose_steps_these_are(browser, owner, web):
    warming = RunFactory(
        owner=owner, name="w", config=CONFIG, max_steps=8, phase="warmup", status="running", step=3,
    )
    page = _open(browser, web, warming)
    assert page.locator("#run-phase-note").is_visible()
    assert "GRPO counts its 8 steps from 0 after it" in page.locator("#run-phase-note").text_content()
    assert not page.locator(".eta-part").is_visible()
    page.close()
    training = RunFactory(
        owner=owner, name="g", config=CONFIG, max_steps=8, phase="grpo", status="running", step=3,
    )
    page = _open(browser, web, training)
    assert not page.locator("#run-phase-note").is_visible()
    assert page.locator(".eta-part").is_visible()
    page.close()
