"""The re-score pages, server side: the run page's card is offered to the owner of a finished
run only (an active run's is hidden until it ends), and a re-score job's page carries its section, its script and escaped names."""

from __future__ import annotations

import pytest

from tests.factories import RunFactory
from tests.fixtures.accounts import grant
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db


def _run(owner, status):
    return RunFactory(owner=owner, name="r", config={"name": "r"}, max_steps=1, status=status)


@pytest.mark.parametrize(
    ("status", "shown"),
    [("succeeded", True), ("failed", True), ("cancelled", True), ("interrupted", True), ("queued", False), ("running", False)],
)
def test_the_run_page_offers_a_rescore_for_finished_runs(client, owner, status, shown):
    # An active run's card is there, hidden: the page shows it when the run ends.
    run = _run(owner, status)
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert ('id="rescore-card">' in page) is shown
    assert ('id="rescore-card" hidden>' in page) is not shown
    assert f'data-api="/api/runs/{run.pk}/rescore/"' in page
    assert "js/rescore_form.js" in page


def test_someone_who_may_only_view_the_run_is_not_offered_the_form(client, owner, outsider):
    run = _run(owner, "succeeded")
    grant(outsider, "runs.view_run")
    client.force_login(outsider)
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    assert 'id="rescore-card"' not in response.content.decode()


def test_a_rescore_jobs_page_has_its_section_and_escapes_names(client, owner):
    run = _run(owner, "succeeded")
    job = Job.objects.create(owner=owner, kind="rescore", params={
        "run": run.pk, "run_name": "<b>r</b>", "recipe": 1, "recipe_name": "<script>x</script>", "version": 2,
        "terms": [], "scale_rewards": "group", "num_generations": 4,
    })  # fmt: skip
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f"Re-score of run #{run.pk} with <em>&lt;script&gt;x&lt;/script&gt;</em> v2" in page
    assert 'id="rescore-result"' in page and f'data-replay="/replay/runs/{run.pk}/"' in page
    assert "js/rescore.js" in page and "<b>r</b>" not in page
    dry = Job.objects.create(owner=owner, kind="dry_run", params={"recipe_name": "d", "version": 1, "policy": {}})
    other = client.get(f"/jobs/{dry.pk}/").content.decode()
    assert 'id="rescore-result"' not in other and "js/rescore.js" not in other
