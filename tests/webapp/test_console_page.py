"""The environment console's page: escaped, with its socket's config, and only for the entry's
owner and the operators. Served through a URLconf of this module, which adds
webapp.catalog.console_urls to the project's (the duplicate is harmless once webapp/urls.py
includes it)."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import include, path

from tests.factories import EnvironmentFactory
from tests.webapp.pages import REFUSAL
from webapp.catalog.models import Environment

urlpatterns = [
    path("", include("webapp.urls")),
    path("", include("webapp.catalog.console_urls")),
]

db = pytest.mark.django_db(transaction=True)


# --- the page ---------------------------------------------------------------------------------


@db
@pytest.mark.urls(__name__)
def test_console_page(client, owner):
    environment = EnvironmentFactory(
        owner=owner, name="<script>alert(1)</script>", metadata={"name": "echo"},
    )
    url = f"/environments/{environment.pk}/console/"

    anonymous = client.get(url)
    client.force_login(owner)
    page = client.get(url)
    missing = client.get(f"/environments/{environment.pk + 1}/console/")

    assert anonymous.status_code == 302
    assert anonymous.url == f"/login/?next={url}"
    assert page.status_code == 200
    body = page.content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    config = {
        "environment": environment.pk,
        "ws_path": f"/ws/environments/{environment.pk}/console/",
        "max_message_bytes": 10240,
    }
    script = re.search(r'<script id="console-config" type="application/json">(.*?)</script>', body)
    assert script is not None and json.loads(script.group(1)) == config
    assert "js/env_console.js" in body
    assert missing.status_code == 404


@db
@pytest.mark.urls(__name__)
def test_console_page_is_the_owners_and_the_operators(owner, outsider, staff, operator):
    private = EnvironmentFactory(owner=owner, name="private")
    shared = EnvironmentFactory(owner=owner, name="shared", shared=True)

    def status(user: Any, environment: Environment) -> tuple[int, str]:
        client = Client()
        client.force_login(user)
        response = client.get(f"/environments/{environment.pk}/console/")
        reason = re.search(r'<p id="forbidden-reason">(.*?)</p>', response.content.decode())
        return response.status_code, reason.group(1) if reason else ""

    refusal = html.escape(REFUSAL.format(name="shared"))
    assert status(owner, private) == (200, "")
    assert status(operator, private) == (200, "")
    assert status(outsider, private) == (404, "")
    assert status(staff, private) == (404, "")
    assert status(outsider, shared) == (403, refusal)
    assert status(staff, shared) == (403, refusal)
    assert status(owner, shared) == (200, "")
