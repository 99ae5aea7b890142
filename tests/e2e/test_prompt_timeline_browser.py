"""The prompt pages in headless Chromium (Debian's package) against the real ASGI server:
from the run's prompt list to one prompt's timeline, its columns side by side, a collapsed
transcript opened, other steps chosen with the picker; model output stays text."""

from __future__ import annotations

import pytest

from tests.support.browser import log_in
from tests.support.prompt_rows import KEY_A, KEY_B, XSS, prompted_run

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_list_leads_to_the_timeline_and_the_picker_chooses_steps(browser, web, owner):
    run = prompted_run(owner)
    page = browser.new_page()
    log_in(page, web, f"/runs/{run.pk}/prompts/")
    page.wait_for_selector("#prompts-table")
    assert page.locator("tr.prompt-row").evaluate_all("rows => rows.map(r => r.dataset.key)") == [KEY_A, KEY_B]

    page.click(f'tr[data-key="{KEY_A}"] a.prompt-link')
    page.wait_for_selector("#timeline-columns")
    assert page.url == f"{web}/runs/{run.pk}/prompts/{KEY_A}/"
    columns = page.locator(".timeline-column")
    assert columns.evaluate_all("cs => cs.map(c => c.dataset.step)") == ["1", "3"]
    # Side by side: the second column starts to the right of the first, on the same row.
    first, second = columns.nth(0).bounding_box(), columns.nth(1).bounding_box()
    assert first is not None and second is not None
    assert second["x"] >= first["x"] + first["width"] and abs(second["y"] - first["y"]) < 1
    # Transcripts start collapsed; opening one shows its tool call.
    call = page.locator('#step-1 article[data-seq="1"] .tool-call')
    assert not call.is_visible()
    page.click('#step-1 article[data-seq="1"] summary')
    assert call.is_visible()
    assert (call.locator(".tool-name").inner_text(), call.locator(".tool-args").inner_text()) == (
        "echo", '{"message":"alpha?"}'
    )

    page.fill("#steps-input", "2, 3")
    page.click("#steps-form button[type=submit]")
    page.wait_for_selector("#steps-default")
    assert page.url.endswith(f"/runs/{run.pk}/prompts/{KEY_A}/?steps=2%2C+3")
    assert page.locator(".timeline-column").evaluate_all("cs => cs.map(c => c.dataset.step)") == ["2", "3"]
    assert page.locator("#step-2 .no-group").inner_text() == "Not trained at this step."

    page.goto(f"{web}/runs/{run.pk}/prompts/{KEY_B}/")
    page.click('#step-2 article[data-seq="4"] summary')
    assert page.locator('#step-2 article[data-seq="4"] .role-tool .message-content').inner_text() == XSS
    assert page.evaluate("window.__xss") is None
    page.close()
