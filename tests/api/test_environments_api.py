"""Who may see and act on an environment over the API: owner, outsider, staff without the
permissions and an operator (staff with them), on every environment endpoint.

Environments point at real echo servers (uvicorn processes). A refusal is asserted with its
exact status and message, and with the row unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.envs.servers import run_env_server
from tests.factories import EnvironmentFactory, RunFactory
from webapp.catalog.models import Environment
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

REFUSAL = (
    "'{name}' is owned by 'owner': only its owner, or a user with the permission "
    "catalog.change_environment, may probe it, measure it, open its console or change it"
)
NOT_FOUND = {"detail": "No Environment matches the given query."}


@pytest.fixture(scope="module")
def small_echo_url() -> Iterator[str]:
    """An echo server that takes two sessions: measuring its capacity is quick."""
    with run_env_server(
        "envs.echo.server:app", {"MAX_CONCURRENT_ENVS": "2", "ENABLE_WEB_INTERFACE": "false"}
    ) as url:
        yield url


@pytest.fixture
def private_env(owner, echo_url) -> Environment:
    return EnvironmentFactory(
        owner=owner, name="private", base_url=echo_url, status="unknown", metadata={"name": "echo"},
    )


@pytest.fixture
def shared_env(owner, small_echo_url) -> Environment:
    return EnvironmentFactory(
        owner=owner, name="shared", base_url=small_echo_url, status="unknown", shared=True,
    )


def _row(environment: Environment) -> tuple[Any, ...]:
    environment.refresh_from_db()
    return (
        environment.status,
        environment.checked_at,
        environment.capacity,
        environment.shared,
        environment.metadata,
    )


# --- reading ----------------------------------------------------------------------------------


def test_list_shows_own_and_shared_entries_and_everything_to_the_operator(
    api, outsider_api, staff_api, operator_api, private_env, shared_env
):
    def names(client) -> list[str]:
        response = client.get("/api/environments/")
        assert response.status_code == 200
        return [e["name"] for e in response.json()]

    assert names(api) == ["private", "shared"]
    assert names(outsider_api) == ["shared"]
    assert names(staff_api) == ["shared"]
    assert names(operator_api) == ["private", "shared"]


def test_detail_is_a_404_for_those_who_may_not_see_it(
    api, outsider_api, staff_api, operator_api, private_env, shared_env
):
    url = f"/api/environments/{private_env.pk}/"

    assert api.get(url).status_code == 200
    assert (outsider_api.get(url).status_code, outsider_api.get(url).json()) == (404, NOT_FOUND)
    assert staff_api.get(url).status_code == 404
    assert operator_api.get(url).status_code == 200
    body = outsider_api.get(f"/api/environments/{shared_env.pk}/").json()
    assert (body["name"], body["owner"], body["shared"]) == ("shared", "owner", True)


def test_anonymous_gets_401_everywhere(private_env):
    from rest_framework.test import APIClient

    anonymous = APIClient()
    pk = private_env.pk
    assert anonymous.get("/api/environments/").status_code == 401
    assert anonymous.get(f"/api/environments/{pk}/").status_code == 401
    assert (
        anonymous.patch(f"/api/environments/{pk}/", {"shared": True}, format="json").status_code
        == 401
    )
    for action in ("probe", "capacity", "stop-container"):
        assert anonymous.post(f"/api/environments/{pk}/{action}/").status_code == 401
    assert _row(private_env)[:2] == ("unknown", None)


# --- acting on it -----------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["probe", "capacity", "stop-container"])
def test_outsiders_and_staff_without_the_permission_are_refused(
    outsider_api, staff_api, private_env, shared_env, action
):
    before_private, before_shared = _row(private_env), _row(shared_env)

    for client in (outsider_api, staff_api):
        hidden = client.post(f"/api/environments/{private_env.pk}/{action}/")
        seen = client.post(f"/api/environments/{shared_env.pk}/{action}/")

        assert (hidden.status_code, hidden.json()) == (404, NOT_FOUND)
        assert (seen.status_code, seen.json()) == (403, {"detail": REFUSAL.format(name="shared")})
    assert (_row(private_env), _row(shared_env)) == (before_private, before_shared)


def test_owner_and_operator_probe(api, operator_api, private_env):
    by_owner = api.post(f"/api/environments/{private_env.pk}/probe/")
    private_env.checked_at = None
    private_env.save()
    by_operator = operator_api.post(f"/api/environments/{private_env.pk}/probe/")

    assert (by_owner.status_code, by_owner.json()["status"]) == (200, "healthy")
    assert (by_operator.status_code, by_operator.json()["status"]) == (200, "healthy")
    assert _row(private_env)[0] == "healthy" and private_env.checked_at is not None


def test_owner_measures_capacity(api, shared_env):
    response = api.post(f"/api/environments/{shared_env.pk}/capacity/")

    assert response.status_code == 200, response.json()
    assert (response.json()["capacity"], response.json()["metadata"]) == (
        2,
        {"capacity_source": "probed"},
    )


@pytest.mark.parametrize("status", [Run.Status.QUEUED, Run.Status.RUNNING])
def test_capacity_is_not_measured_while_a_run_uses_the_environment(api, owner, shared_env, status):
    run = RunFactory(owner=owner, name="busy", status=status)
    run.environments.set([shared_env])
    before = _row(shared_env)

    response = api.post(f"/api/environments/{shared_env.pk}/capacity/")

    assert response.status_code == 400
    assert response.json() == {
        "capacity": [
            "1 queued or running run(s) use 'shared': measuring opens sessions until the server "
            "refuses, which would fail their rollouts; measure it once they finish"
        ]
    }
    assert _row(shared_env) == before


def test_a_finished_run_does_not_block_measuring(api, owner, shared_env):
    run = RunFactory(owner=owner, name="done", status=Run.Status.SUCCEEDED)
    run.environments.set([shared_env])

    assert api.post(f"/api/environments/{shared_env.pk}/capacity/").status_code == 200


def test_sharing_is_the_owners_and_the_operators_call(
    api, outsider_api, staff_api, operator_api, private_env, shared_env
):
    def patch(client, environment, shared):
        return client.patch(
            f"/api/environments/{environment.pk}/", {"shared": shared}, format="json"
        )

    assert patch(outsider_api, private_env, True).status_code == 404
    refused = patch(outsider_api, shared_env, False)
    assert (refused.status_code, refused.json()) == (403, {"detail": REFUSAL.format(name="shared")})
    assert patch(staff_api, shared_env, False).status_code == 403
    assert (private_env.shared, _row(shared_env)[3]) == (False, True)

    shared = patch(api, private_env, True)
    assert (shared.status_code, shared.json()["shared"]) == (200, True)
    assert outsider_api.get(f"/api/environments/{private_env.pk}/").status_code == 200
    unshared = patch(operator_api, private_env, False)
    assert (unshared.status_code, unshared.json()["shared"]) == (200, False)
    assert _row(private_env)[3] is False
    assert outsider_api.get(f"/api/environments/{private_env.pk}/").status_code == 404


def test_stop_container_of_an_entry_without_one_says_so(api, private_env):
    response = api.post(f"/api/environments/{private_env.pk}/stop-container/")

    assert (response.status_code, response.json()) == (
        400,
        {"container": ["'private' has no container started here"]},
    )


def test_registration_can_share_the_entry(api, outsider_api, echo_url):
    response = api.post(
        "/api/environments/", {"name": "mine", "base_url": echo_url, "shared": True}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert (response.json()["owner"], response.json()["shared"]) == ("owner", True)
    assert [e["name"] for e in outsider_api.get("/api/environments/").json()] == ["mine"]


def test_workers_show_their_run_only_to_those_who_may_see_it(
    api, outsider_api, operator_api, owner
):
    from django.utils import timezone

    from webapp.runs.models import WorkerHeartbeat

    run = RunFactory(owner=owner, name="mine")
    WorkerHeartbeat.objects.create(name="w1", heartbeat_at=timezone.now(), current_run=run)
    WorkerHeartbeat.objects.create(name="w2", heartbeat_at=timezone.now())

    def current(client) -> list[tuple[str, int | None]]:
        response = client.get("/api/workers/")
        assert response.status_code == 200
        return [(w["name"], w["current_run"]) for w in response.json()]

    assert current(api) == [("w1", run.pk), ("w2", None)]
    assert current(outsider_api) == [("w1", None), ("w2", None)]
    assert current(operator_api) == [("w1", run.pk), ("w2", None)]
