"""Launch again: /runs/new/?from=<id> opens the new-run form's JSON with that run's config under
a fresh name, for a run the user may see; another's run is a 404 and nothing is written."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.factories import RunFactory
from tests.fixtures.accounts import grant, signed_in
from webapp.catalog.models import Environment
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


def _config_json(page: str) -> dict:
    found = re.search(r'<textarea name="config_json"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, "no config textarea"
    return json.loads(html.unescape(found.group(1)))


def _launched(owner: User, echo_env: Environment, name: str = "catch-lr") -> Run:
    # The row run_launch writes, without launching (no demo model or environment server here).
    config = {
        "name": name,
        "model": "demo:echo",
        "environments": [{"environment": echo_env.pk, "prompt": "Echo 'a'."}],
        "grpo": {"learning_rate": 3e-5, "max_steps": 2},
    }
    return RunFactory(owner=owner, name=name, config=config, max_steps=2)


def test_launch_again_prefills_the_json_with_the_runs_config_and_a_fresh_name(
    owner_client: Client, owner: User, echo_env: Environment
) -> None:
    source = _launched(owner, echo_env)
    again = _launched(owner, echo_env, name="catch-lr (again)")

    detail = owner_client.get(reverse("run-detail", args=[source.pk])).content.decode()
    page = owner_client.get(f"/runs/new/?from={source.pk}").content.decode()

    assert f'<a class="button" id="launch-again" href="/runs/new/?from={source.pk}"' in detail
    assert 'id="json-section" open' in page and 'id="launch-again-note"' in page
    assert _config_json(page) == {**source.config, "name": "catch-lr (again)"}
    # Launched again from a launch-again, the name does not grow.
    assert _config_json(owner_client.get(f"/runs/new/?from={again.pk}").content.decode())["name"] == "catch-lr (again)"


def test_a_viewer_may_launch_again_an_outsider_gets_a_404(
    owner_client: Client, owner: User, echo_env: Environment, outsider: User, django_user_model
) -> None:
    source = _launched(owner, echo_env)
    viewer = signed_in(grant(django_user_model.objects.create_user("viewer"), "runs.view_run"))

    outsider_page = signed_in(outsider).get(f"/runs/new/?from={source.pk}")
    viewer_page = viewer.get(f"/runs/new/?from={source.pk}")
    not_a_number = owner_client.get("/runs/new/?from=1;drop")
    missing = owner_client.get(f"/runs/new/?from={source.pk + 1000}")

    assert (outsider_page.status_code, not_a_number.status_code, missing.status_code) == (404, 404, 404)
    assert _config_json(viewer_page.content.decode())["name"] == "catch-lr (again)"
    assert Run.objects.count() == 1


def test_a_long_name_is_cut_to_fit_with_its_suffix() -> None:
    from webapp.runs.views import launch_again_config

    config = launch_again_config(Run(name="n" * 120, config={"name": "n" * 120, "model": "demo:echo"}))

    assert config == {"name": "n" * 112 + " (again)", "model": "demo:echo"}
