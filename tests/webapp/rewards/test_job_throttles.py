"""The requests that queue a job on the worker (dry run, learnability, re-score) count against
the launch rate like a run launch; a refused request queues nothing."""

from __future__ import annotations

import pytest

from tests.factories import RunFactory
from webapp.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def launch_once_a_minute(settings):
    from django.core.cache import cache

    cache.clear()
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "launch": "1/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    yield
    cache.clear()


@pytest.mark.parametrize("path", ["dry-run", "learnability", "rescore"])
def test_job_requests_are_throttled_as_launches(api, owner, launch_once_a_minute, path) -> None:
    created = api.post("/api/reward-recipes/", {"name": "r", "terms": [{"name": "e", "kind": "env_reward"}]}, format="json")
    recipe = created.json()["id"]
    run = RunFactory(owner=owner, name="done", max_steps=1, status="succeeded")
    url = f"/api/runs/{run.pk}/rescore/" if path == "rescore" else f"/api/reward-recipes/{recipe}/{path}/"
    first = api.post(url, {"environment": 999999, "recipe": 999999}, format="json")
    assert first.status_code == 400  # refused on its merits, and counted
    assert api.post(url, {"environment": 999999, "recipe": 999999}, format="json").status_code == 429
    assert Job.objects.count() == 0
