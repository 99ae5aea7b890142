"""/api/docs/ (Swagger UI) and /api/redoc/ (ReDoc) in headless Chromium against the real ASGI
server: each draws the lab's operations from /api/schema/, and every request the page makes,
scripts, styles, fonts and the schema alike, goes to the lab itself."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.support.browser import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _open_signed_in(browser, web: str, path: str):
    """A page signed in as the owner at `path`, and the list of every URL it requested."""
    page = browser.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    log_in(page, web, path)
    return page, requested


def _off_host(requested: list[str], web: str) -> list[str]:
    host = urlsplit(web).netloc
    return [url for url in requested if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).netloc != host]


def test_swagger_ui_shows_the_operations_with_no_request_off_the_host(browser, owner, web):
    page, requested = _open_signed_in(browser, web, "/api/docs/")
    page.wait_for_selector(".opblock-summary-path", timeout=30_000)
    paths = page.eval_on_selector_all(".opblock-summary-path", "els => els.map(e => e.dataset.path)")
    assert "/api/runs/{id}/metrics/export/" in paths
    assert "/api/runs/" in paths
    assert page.locator(".info .title").inner_text().startswith("envlab API")
    page.wait_for_load_state("networkidle")
    assert f"{web}/api/schema/" in requested
    assert any("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in url for url in requested)
    assert _off_host(requested, web) == []
    page.close()


def test_redoc_shows_the_operations_with_no_request_off_the_host(browser, owner, web):
    page, requested = _open_signed_in(browser, web, "/api/redoc/")
    page.wait_for_selector("h1", timeout=30_000)
    assert page.locator("h1").first.inner_text().startswith("envlab API")
    page.wait_for_selector("text=/api/runs/{id}/metrics/export/", timeout=30_000)
    page.wait_for_load_state("networkidle")
    assert any(url == f"{web}/api/redoc/redoc.standalone.js" for url in requested)
    assert _off_host(requested, web) == []
    page.close()


def test_a_visitor_is_sent_to_the_login_page(client):
    for path in ("/api/docs/", "/api/redoc/"):
        response = client.get(path)
        assert (response.status_code, response["Location"]) == (302, f"/login/?next={path}")
