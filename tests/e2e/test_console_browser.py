"""The environment console in headless Chromium (Debian's package), against the real ASGI
server and the real echo server: reset, call `echo` with markup, and see it as text.

Needs the console's routes in the project's URLconf and WebSocket routing
(webapp.catalog.console_urls and webapp.catalog.routing)."""

from __future__ import annotations

import pytest

from tests.support.browser import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]



def test_console_shows_environment_text_as_text(browser, owner, web, echo_env):
    environment = echo_env  # tests/fixtures/catalog.py
    evil = '<img src=x onerror="window.__xss=1">'

    page = browser.new_page()
    log_in(page, web, f"/environments/{environment.pk}/console/")
    page.wait_for_selector('#console-page[data-live="live"]', timeout=30_000)

    page.fill("#reset-seed", "3")
    page.fill("#reset-target", evil)
    page.click("#reset-button")
    # The first reset imports openenv in the web process: seconds.
    page.wait_for_selector('li.console-entry[data-kind="reset"]', timeout=60_000)
    assert page.locator("#console-page").get_attribute("data-reward") == "0"

    tool = page.locator('#console-tools form[data-tool="echo"]')
    tool.locator('[data-param="message"]').fill(evil)
    tool.locator("button[type=submit]").click()
    page.wait_for_selector('li.console-entry[data-kind="result"]', timeout=30_000)

    result = page.locator('li.console-entry[data-kind="result"]')
    assert result.locator("pre").inner_text() == evil
    # Shown as text, never parsed: no element was made of it and nothing ran.
    assert page.locator("#console-log img").count() == 0
    assert page.evaluate("window.__xss") is None
    # An exact repeat of the target scores 1.0 and ends the episode.
    root = page.locator("#console-page")
    assert (root.get_attribute("data-reward"), root.get_attribute("data-done")) == ("1", "true")
    assert page.locator('#console-state dd[data-key="tool_calls"]').inner_text() == "1"
    page.close()
