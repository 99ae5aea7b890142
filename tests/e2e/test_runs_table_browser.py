"""The runs table in headless Chromium: filter by tag, sort by a column, and a reload (the URL)
shows the same table; bulk tag through the API keeps that state; names stay text."""

from __future__ import annotations

import pytest

from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.runs.models import Run, RunTag

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = '<img src=x onerror="window.__xss=1">'


def _rows(page) -> list[int]:
    return [int(pk) for pk in page.eval_on_selector_all("tr.run-row", "rows => rows.map(r => r.dataset.runId)")]


def test_filter_and_sort_survive_a_reload_and_bulk_tag(browser, owner, web):
    made = {}
    for name, step, tag in (("a-run", 1, "keep"), (XSS, 3, "keep"), ("c-run", 2, "keep"), ("other", 5, "")):
        made[name] = RunFactory(
            owner=owner, name=name, max_steps=5, step=step, status="succeeded",
        )
        if tag:
            RunTag.objects.create(run=made[name], slug=tag)
    page = browser.new_page()
    log_in(page, web, "/")
    page.wait_for_selector("#run-table")

    page.fill("#filter-tag", "keep")
    page.click("#filter-apply")
    page.wait_for_url("**tag=keep**")
    page.click('a.sort-link[data-field="step"]')  # ascending
    page.wait_for_url("**ordering=step**")
    page.click('a.sort-link[data-field="step"]')  # then descending
    page.wait_for_url("**ordering=-step**")
    expected = [made[XSS].pk, made["c-run"].pk, made["a-run"].pk]
    assert _rows(page) == expected

    page.reload()
    page.wait_for_selector("#run-table")
    assert _rows(page) == expected
    assert page.input_value("#filter-tag") == "keep"
    assert page.get_attribute('th[aria-sort="descending"] a', "data-field") == "step"

    page.check(f'input[name=run][value="{made["a-run"].pk}"]')
    page.check(f'input[name=run][value="{made[XSS].pk}"]')
    page.fill("#bulk-tag", "best")
    with page.expect_navigation():
        page.click("#bulk-tag-button")
    page.wait_for_selector("#run-table")
    assert "tag=keep" in page.url and "ordering=-step" in page.url
    assert _rows(page) == expected
    tags = {run.pk: sorted(run.tags.values_list("slug", flat=True)) for run in Run.objects.all()}
    assert tags == {
        made["a-run"].pk: ["best", "keep"], made[XSS].pk: ["best", "keep"], made["c-run"].pk: ["keep"],
        made["other"].pk: [],
    }
    assert page.text_content(f'tr[data-run-id="{made[XSS].pk}"] a.run-name') == XSS
    assert page.evaluate("() => window.__xss") is None

    page.on("dialog", lambda dialog: dialog.accept())
    page.check(f'input[name=run][value="{made["c-run"].pk}"]')
    with page.expect_navigation():
        page.click("#bulk-delete-button")
    page.wait_for_selector("#run-table")
    assert _rows(page) == [made[XSS].pk, made["a-run"].pk]
    assert sorted(Run.objects.values_list("pk", flat=True)) == sorted(
        [made["a-run"].pk, made[XSS].pk, made["other"].pk]
    )
    page.close()


def test_the_run_page_edits_its_labels_in_place(browser, owner, web):
    run = RunFactory(owner=owner, name="before", max_steps=5, status="succeeded")
    page = browser.new_page()
    log_in(page, web, f"/runs/{run.pk}/")
    page.wait_for_selector("#run-labels-form", state="attached")
    page.click("#run-labels-edit summary")

    page.fill("#labels-tags", "Bad Tag")
    page.click("#labels-save")
    page.wait_for_selector("#labels-errors:not([hidden])")
    assert page.text_content("#labels-errors").startswith("tags: tag 0 ('Bad Tag') is not a slug")

    page.fill("#labels-name", "after")
    page.fill("#labels-tags", "lr-sweep, seed-1")
    page.fill("#labels-group", "catch lr")
    page.fill("#labels-notes", XSS)
    page.click("#labels-save")
    page.wait_for_function("document.getElementById('labels-state').textContent === 'saved'")

    assert page.text_content("#run-name") == "after"
    assert page.eval_on_selector_all("#run-tags .tag", "tags => tags.map(t => t.textContent)") == ["lr-sweep", "seed-1"]
    assert page.text_content("#run-group") == "catch lr"
    assert page.text_content("#run-notes") == XSS
    assert page.evaluate("() => window.__xss") is None
    run.refresh_from_db()
    assert (run.name, run.group, run.notes) == ("after", "catch lr", XSS)
    assert sorted(run.tags.values_list("slug", flat=True)) == ["lr-sweep", "seed-1"]
    page.close()
