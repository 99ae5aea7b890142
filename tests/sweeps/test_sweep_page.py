"""The sweep page (/sweeps/<id>/): members, differing parameters as columns, the metric's summary,
the figure, "Cancel the rest"; and the run page's link to its sweep. Owner, viewer, outsider."""

from __future__ import annotations

import json

import pytest

from tests.factories import UserFactory
from tests.fixtures.accounts import grant, signed_in
from tests.sweeps.conftest import GRID
from webapp.runs.models import MetricPoint, Run
from webapp.sweeps.models import Sweep
from webapp.sweeps.services import sweep_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def sweep(owner, base, quota_of_two):
    return sweep_create(owner=owner, data={"name": "lr-seeds", "base": base, "grid": GRID})


def _figure(html: str) -> dict:
    start = html.index('<script id="sweep-figure" type="application/json">') + len('<script id="sweep-figure" type="application/json">')
    return json.loads(html[start:html.index("</script>", start)])


def test_the_page_shows_members_their_parameters_and_the_summary(owner, sweep):
    runs = list(Run.objects.order_by("sweep_member__index"))
    MetricPoint.objects.bulk_create([
        MetricPoint(run=runs[0], step=2, key="reward", value=0.75, seq=1),
        MetricPoint(run=runs[3], step=2, key="reward", value=0.25, seq=1),
    ])
    response = signed_in(owner).get(f"/sweeps/{sweep.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('<th scope="col" class="sweep-param">') == 2
    assert '<code>grpo.learning_rate</code>' in html and '<code>grpo.seed</code>' in html
    assert html.count('class="sweep-member"') == 6
    assert html.count('data-status="pending"') == 4
    assert '<td class="sweep-score">0.7500</td>' in html
    assert 'id="cancel-rest-button">Cancel the rest (4 pending)</button>' in html
    (trace,) = _figure(html)["data"]
    assert trace["customdata"] == [runs[0].pk, runs[3].pk]
    assert [d["label"] for d in trace["dimensions"]] == ["grpo.learning_rate", "grpo.seed", "reward (last)"]


def test_cancel_the_rest_from_the_page(owner, sweep):
    browser = signed_in(owner)
    response = browser.post(f"/sweeps/{sweep.pk}/cancel-rest/")
    assert (response.status_code, response["Location"]) == (302, f"/sweeps/{sweep.pk}/")
    assert list(Run.objects.order_by("sweep_member__index").values_list("status", flat=True)) == [
        "queued", "queued", "cancelled", "cancelled", "cancelled", "cancelled",
    ]
    html = browser.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert "Cancelled 4 pending runs; running ones go on." in html
    assert "cancel-rest-button" not in html


def test_a_viewer_reads_the_page_without_the_button_and_an_outsider_gets_404(sweep, outsider):
    viewer = grant(UserFactory(username="viewer"), "runs.view_run")
    html = signed_in(viewer).get(f"/sweeps/{sweep.pk}/").content.decode()
    assert "cancel-rest-button" not in html
    assert signed_in(viewer).post(f"/sweeps/{sweep.pk}/cancel-rest/").status_code == 403
    assert signed_in(outsider).get(f"/sweeps/{sweep.pk}/").status_code == 404
    assert signed_in(outsider).post(f"/sweeps/{sweep.pk}/cancel-rest/").status_code == 404
    assert Run.objects.filter(status="pending").count() == 4
    assert Sweep.objects.get().status == "active"


def test_the_run_page_links_to_its_sweep(owner, sweep):
    run = Run.objects.get(sweep_member__index=3)
    html = signed_in(owner).get(f"/runs/{run.pk}/").content.decode()
    assert f'<dd id="run-sweep"><a href="/sweeps/{sweep.pk}/">lr-seeds</a> <span class="muted">(member 3)</span></dd>' in html
