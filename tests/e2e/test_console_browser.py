"""The environment console in headless Chromium (Debian's package), against the real ASGI
server and the real echo server: reset, call `echo` with markup, and see it as text.

Needs the console's routes in the project's URLconf and WebSocket routing
(webapp.catalog.console_urls and webapp.catalog.routing)."""

from __future__ import annotations

import os

import pytest

from webapp.catalog.models import Environment

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(
            "Debian's chromium is missing: make test installs it (apt-get install chromium)"
        )
    # Playwright's sync API runs an event loop in this thread for as long as the browser
    # lives; the ORM calls made here (and the database flush after each test) are plain
    # blocking calls, which Django refuses in such a thread unless told.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield browser
        browser.close()
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def test_console_shows_environment_text_as_text(browser, owner, web, echo_url):
    environment = Environment.objects.create(
        name="echo", base_url=echo_url, capacity=64, metadata={"name": "echo"}, status="healthy"
    )
    evil = '<img src=x onerror="window.__xss=1">'

    page = browser.new_page()
    page.goto(f"{web}/login/?next=/environments/{environment.pk}/console/")
    page.fill("input[name=username]", "owner")
    page.fill("input[name=password]", "owner-pw")
    page.click("button[type=submit], input[type=submit]")
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
