"""webapp/static/js/live_socket.js in headless Chromium (Debian's package), on the environment console
against the real ASGI server and the real echo server. Playwright's WebSocket route sits
between the page and the server, passing every message through, so that the test can drop a
connection with the close code it needs: a drop is reconnected, a refusal code is final."""

from __future__ import annotations

import pytest

from tests.support.browser import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_dropped_socket_comes_back_and_a_refused_one_stays_closed(browser, owner, web, echo_env):
    environment = echo_env  # tests/fixtures/catalog.py
    connections = []  # (page side, server side), one per socket the page opened

    def relay(route) -> None:
        connections.append((route, route.connect_to_server()))

    page = browser.new_page()
    page.route_web_socket(f"**/ws/environments/{environment.pk}/console/", relay)
    log_in(page, web, f"/environments/{environment.pk}/console/")
    root = page.locator("#console-page")
    page.wait_for_selector('#console-page[data-live="live"]', timeout=30_000)
    assert len(connections) == 1

    # A drop that is no refusal (1011, the server's internal error): reconnected after the
    # first backoff (0.5 s and up to 0.25 s of jitter), and the tool list makes it live again.
    first_page_side, first_server_side = connections[0]
    first_page_side.close(code=1011, reason="dropped by the test")
    first_server_side.close()
    page.wait_for_function(
        "document.getElementById('console-page').dataset.live === 'reconnecting'"
    )
    page.wait_for_selector('#console-page[data-live="live"]', timeout=30_000)
    assert len(connections) == 2
    assert page.locator("#reset-button").is_enabled()

    # 4429 is the server's "too many consoles open": final, said in the indicator, never retried.
    second_page_side, second_server_side = connections[1]
    second_page_side.close(code=4429, reason="refused by the test")
    second_server_side.close()
    page.wait_for_selector('#console-page[data-live="closed"]', timeout=10_000)
    assert page.locator("#console-status").inner_text() == "closed: too many consoles open"
    assert page.locator("#reset-button").is_disabled()
    # Four times the longest first retry (0.75 s): no third socket was opened.
    page.wait_for_timeout(3000)
    assert len(connections) == 2
    assert root.get_attribute("data-live") == "closed"
    page.close()
