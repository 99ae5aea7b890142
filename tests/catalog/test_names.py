"""Catalog names: unique per owner (security review K5), the bundled servers' names reserved
(N5). Registration goes through the API against the session's real echo server; runs are
launched through the API too (no worker: they stay queued)."""

from __future__ import annotations

import re

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from tests.factories import EnvironmentFactory
from tests.support.run_launch import launch_config
from webapp.catalog.models import Environment
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

RESERVED = (
    "is reserved for the bundled environments (echo, wordle, catch, sudoku, mcpdemo, ors, their "
    "'-bundled' names and names starting with 'ors-', in any case): give another name"
)


def _catalog() -> list[tuple[str, str | None, bool]]:
    return sorted(
        (e.name, e.owner.username if e.owner else None, e.shared)
        for e in Environment.objects.select_related("owner")
    )


def test_a_name_someone_keeps_private_is_free_to_others_and_never_mentioned(
    api, outsider_api, owner, echo_url
):
    """The review's reproduction: before, the outsider was told "an environment named
    'acme-secret-project' already exists" while the entry itself was a 404 to them."""
    secret = EnvironmentFactory(
        owner=owner, name="acme-secret-project", status=Environment.Status.UNKNOWN,
    )

    response = outsider_api.post(
        "/api/environments/", {"name": "acme-secret-project", "base_url": echo_url}, format="json"
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["owner"], body["shared"]) == ("acme-secret-project", "outsider", False)
    assert body["id"] != secret.pk
    assert [e["id"] for e in body["registered"]] == [body["id"]]
    assert [e["id"] for e in outsider_api.get("/api/environments/").json()] == [body["id"]]
    assert outsider_api.get(f"/api/environments/{secret.pk}/").status_code == 404
    assert [e["id"] for e in api.get("/api/environments/").json()] == [secret.pk]
    assert _catalog() == [
        ("acme-secret-project", "outsider", False),
        ("acme-secret-project", "owner", False),
    ]


def test_a_name_of_ones_own_is_refused_and_nothing_is_written(api, owner, echo_url):
    EnvironmentFactory(owner=owner, name="lab", status=Environment.Status.UNKNOWN)

    response = api.post("/api/environments/", {"name": "lab", "base_url": echo_url}, format="json")

    assert response.status_code == 400
    assert response.json() == {"name": ["you already have an environment named 'lab'"]}
    assert _catalog() == [("lab", "owner", False)]


@pytest.mark.parametrize("name", ["echo", "wordle", "ECHO", "Sudoku", "ors", "ors-echo", "echo-bundled"])
def test_a_bundled_name_is_refused_to_a_user(api, echo_url, name):
    response = api.post("/api/environments/", {"name": name, "base_url": echo_url}, format="json")

    assert response.status_code == 400
    assert response.json() == {"name": [f"'{name}' {RESERVED}"]}
    assert _catalog() == []


def test_names_like_bundled_ones_but_not_theirs_are_free(api, echo_url):
    for name in ("echo-2", "my-wordle", "orsx"):
        response = api.post("/api/environments/", {"name": name, "base_url": echo_url}, format="json")
        assert response.status_code == 201, (name, response.json())
    assert [name for name, _, _ in _catalog()] == ["echo-2", "my-wordle", "orsx"]


def test_two_users_with_one_name_each_train_on_their_own(
    api, outsider_api, owner, outsider, echo_url, built_model
):
    mine = api.post("/api/environments/", {"name": "lab", "base_url": echo_url}, format="json")
    theirs = outsider_api.post("/api/environments/", {"name": "lab", "base_url": echo_url}, format="json")
    assert (mine.status_code, theirs.status_code) == (201, 201), (mine.json(), theirs.json())
    mine_id, theirs_id = mine.json()["id"], theirs.json()["id"]

    launched = [
        api.post("/api/runs/", launch_config(mine_id), format="json"),
        outsider_api.post("/api/runs/", launch_config(theirs_id), format="json"),
    ]
    crossed = outsider_api.post("/api/runs/", launch_config(mine_id), format="json")

    assert [r.status_code for r in launched] == [201, 201], [r.json() for r in launched]
    assert crossed.status_code == 400
    assert crossed.json() == {"environments.0.environment": [f"no environment with id {mine_id}"]}
    runs = {run.owner.username: [e.pk for e in run.environments.all()] for run in Run.objects.all()}
    assert runs == {"owner": [mine_id], "outsider": [theirs_id]}
    assert [(e["id"], e["name"]) for e in api.get("/api/environments/").json()] == [(mine_id, "lab")]
    assert [(e["id"], e["name"]) for e in outsider_api.get("/api/environments/").json()] == [
        (theirs_id, "lab")
    ]


def test_the_database_holds_names_unique_per_owner(owner, outsider):
    EnvironmentFactory(owner=owner, name="lab", status=Environment.Status.UNKNOWN)
    EnvironmentFactory(owner=outsider, name="lab", status=Environment.Status.UNKNOWN)

    with pytest.raises(IntegrityError), transaction.atomic():
        EnvironmentFactory(
            owner=owner,
            name="lab",
            base_url="http://127.0.0.1:10",
            status=Environment.Status.UNKNOWN,
        )

    assert _catalog() == [("lab", "outsider", False), ("lab", "owner", False)]


def test_the_run_form_tells_two_entries_of_one_name_apart(owner_client, owner, outsider):
    mine = EnvironmentFactory(owner=owner, name="lab", status=Environment.Status.UNKNOWN)
    theirs = EnvironmentFactory(
        owner=outsider, name="lab", shared=True, status=Environment.Status.UNKNOWN,
    )
    bundled = EnvironmentFactory(
        owner=outsider,
        name="echo",
        shared=True,
        metadata={"bundled": "echo"},
        status=Environment.Status.UNKNOWN,
    )
    EnvironmentFactory(owner=outsider, name="lab-private", status=Environment.Status.UNKNOWN)

    content = owner_client.get(reverse("run-new")).content.decode()

    options = re.findall(r'<option value="(\d+)"(?: selected)?>([^<]*)</option>', content)
    assert [(int(pk), label) for pk, label in options if int(pk) in (mine.pk, theirs.pk, bundled.pk)] == [
        (bundled.pk, "echo (unknown), bundled"),
        (mine.pk, "lab (unknown)"),
        (theirs.pk, "lab (unknown), shared by outsider"),
    ]
    assert "lab-private" not in content
