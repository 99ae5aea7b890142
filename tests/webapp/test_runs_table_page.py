"""The home page as the runs table: its query string filters, sorts, pages and picks summary
columns (the API's parameters); tags, groups, names and notes are escaped; the run page
offers its labels form to the owner only."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.factories import RunFactory
from tests.fixtures.accounts import grant, signed_in
from webapp.runs.models import MetricPoint, Run, RunTag

pytestmark = pytest.mark.django_db

XSS = '<img src=x onerror="window.__xss=1">'


def _row_ids(content: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<tr class="run-row" data-run-id="(\d+)"', content)]


@pytest.fixture
def runs(owner, outsider):
    made = {}
    for name, status, group, step in (
        ("alpha", Run.Status.SUCCEEDED, "sweep-a", 3), ("beta", Run.Status.FAILED, "sweep-a", 1),
        ("gamma", Run.Status.SUCCEEDED, "", 2),
    ):
        made[name] = RunFactory(owner=owner, name=name, status=status, group=group, step=step)
    RunTag.objects.create(run=made["alpha"], slug="keep")
    RunTag.objects.create(run=made["gamma"], slug="keep")
    made["theirs"] = RunFactory(owner=outsider, name="theirs", group="sweep-a")
    return made


def test_the_query_string_filters_and_sorts_the_table(owner_client, runs):
    content = owner_client.get(reverse("home") + "?tag=keep&ordering=-step").content.decode()

    assert _row_ids(content) == [runs["alpha"].pk, runs["gamma"].pk]
    assert 'value="keep"' in content  # the filter form shows the state it came from
    assert '<input type="hidden" name="ordering" value="-step">' in content
    # The Progress column is sorted descending; its link sorts ascending, keeping the filter.
    assert re.search(r'aria-sort="descending"><a href="/\?tag=keep&amp;ordering=step" class="sort-link" '
                     r'data-field="step">Progress ▼</a>', content)
    assert '1–2 of 2' in content
    assert "theirs" not in content


def test_summary_columns_show_last_max_min_and_step(owner_client, runs):
    for step, value in ((1, 0.25), (2, 0.75), (3, 0.5)):
        MetricPoint.objects.create(run=runs["alpha"], key="reward", step=step, value=value, seq=step)

    content = owner_client.get(reverse("home") + "?summary=reward&group=sweep-a&ordering=name").content.decode()

    assert _row_ids(content) == [runs["alpha"].pk, runs["beta"].pk]
    cells = re.findall(r'<td class="summary-cell">(.*?)</td>', content)
    assert cells == [
        '0.5000 <span class="muted small">(0.7500 / 0.2500) @ 3</span>',
        '<span class="muted">—</span>',
    ]
    assert '<th scope="col" class="summary-col"><code>reward</code>' in content


def test_pages_of_fifty_link_to_each_other(owner_client, owner):
    made = [RunFactory(owner=owner, name=f"r{i}") for i in range(55)]

    first = owner_client.get(reverse("home") + "?ordering=id").content.decode()
    second = owner_client.get(reverse("home") + "?ordering=id&offset=50").content.decode()

    assert _row_ids(first) == [run.pk for run in made[:50]]
    assert _row_ids(second) == [run.pk for run in made[50:]]
    assert '<a href="/?ordering=id&amp;offset=50" id="page-next">' in first
    assert 'id="page-previous"' not in first
    assert '<a href="/?ordering=id" id="page-previous">' in second
    assert "51–55 of 55" in second


def test_untrusted_names_groups_and_notes_are_escaped(owner_client, owner):
    run = RunFactory(owner=owner, name=XSS, group=XSS, notes=XSS)
    RunTag.objects.create(run=run, slug="ok")

    home = owner_client.get(reverse("home")).content.decode()
    page = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()

    assert XSS not in home
    assert XSS not in page
    assert "&lt;img src=x onerror=&quot;window.__xss=1&quot;&gt;" in home
    assert '<dd id="run-notes" class="notes">&lt;img src=x onerror=&quot;window.__xss=1&quot;&gt;</dd>' in page


def test_a_bad_filter_says_so_and_lists_nothing(owner_client, runs):
    content = owner_client.get(reverse("home") + "?status=done").content.decode()

    assert _row_ids(content) == []
    assert "status: Select a valid choice. done is not one of the available choices." in content
    assert 'id="no-match"' in content


def test_the_labels_form_is_the_owners_only(owner_client, owner, django_user_model):
    run = RunFactory(owner=owner, name="mine", group="g1", notes="n1")
    RunTag.objects.create(run=run, slug="t1")
    viewer = signed_in(grant(django_user_model.objects.create_user("viewer"), "runs.view_run"))

    mine = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    theirs = viewer.get(reverse("run-detail", args=[run.pk])).content.decode()

    assert f'<form id="run-labels-form" data-api="/api/runs/{run.pk}/">' in mine
    assert 'value="t1"' in mine
    assert "js/run_labels.js" in mine
    assert 'id="run-labels-form"' not in theirs
    assert "js/run_labels.js" not in theirs
    assert '<span class="badge tag">t1</span>' in theirs


def test_the_filter_forms_empty_fields_filter_nothing(owner_client, runs):
    query = "?status=&tag=keep&group=&model=&search=&summary=&summary=&summary="

    content = owner_client.get(reverse("home") + query).content.decode()

    assert _row_ids(content) == [runs["gamma"].pk, runs["alpha"].pk]
    assert 'id="table-errors"' not in content
