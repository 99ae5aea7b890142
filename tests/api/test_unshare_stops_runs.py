"""Un-sharing an environment stops other users' runs on it (security review N10).

The owner un-shares through the API; the outsiders' runs were launched through the API on
the session's real echo server. No worker runs here: a running run is claimed through the
service a worker's task calls (`run_claim`), and what its telemetry sink would hear is the
lease renewal's answer (`run_heartbeat`: still ours, cancel requested).
"""

from __future__ import annotations

import html
import json
from typing import Any

import pytest

from tests.fixtures.accounts import token_client
from tests.support.run_launch import launch_config
from webapp.catalog.models import Environment
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import run_claim, run_heartbeat

pytestmark = pytest.mark.django_db

REASON = "the environment 'echo' is no longer shared with you"


def _launch(client: Any, env_id: int, name: str) -> int:
    response = client.post("/api/runs/", launch_config(env_id, name=name), format="json")
    assert response.status_code == 201, response.json()
    return int(response.json()["id"])


def _events(client: Any, run_id: int) -> list[tuple[str, str, dict[str, Any]]]:
    response = client.get(f"/api/runs/{run_id}/events/")
    assert response.status_code == 200, response.json()
    body = response.json()
    events = body["results"] if isinstance(body, dict) else body
    return [(e["kind"], e["message"], e["data"]) for e in events]


@pytest.fixture
def shared_echo(api, echo_env: Environment) -> Environment:
    response = api.patch(f"/api/environments/{echo_env.pk}/", {"shared": True}, format="json")
    assert response.status_code == 200 and response.json()["shared"] is True
    return echo_env


def test_unsharing_cancels_others_queued_runs_and_stops_their_running_ones(
    api, outsider_api, operator_api, django_user_model, shared_echo, built_model
):
    third_api = token_client(django_user_model.objects.create_user("third", password="third-pw-long"))
    queued = _launch(outsider_api, shared_echo.pk, "queued")
    running = _launch(third_api, shared_echo.pk, "running")
    own = _launch(api, shared_echo.pk, "own")
    seen_by_all = _launch(operator_api, shared_echo.pk, "operator")  # sees every entry
    claim = run_claim(run_id=running, lease_owner="lease-1", worker_name="worker-1")
    assert claim.outcome == "claimed"
    before = {pk: len(_events(api if pk == own else operator_api, pk)) for pk in (own, seen_by_all)}

    response = api.patch(f"/api/environments/{shared_echo.pk}/", {"shared": False}, format="json")

    assert response.status_code == 200 and response.json()["shared"] is False
    shown = outsider_api.get(f"/api/runs/{queued}/").json()
    assert (shown["status"], shown["error"], shown["cancel_requested"]) == ("cancelled", REASON, False)
    assert _events(outsider_api, queued)[-1] == (
        "cancelled", f"Cancelled before it started: {REASON}.", {"reason": "environment_not_shared"}
    )
    shown = third_api.get(f"/api/runs/{running}/").json()
    assert (shown["status"], shown["error"], shown["cancel_requested"]) == ("running", "", True)
    assert _events(third_api, running)[-1] == (
        "cancel_requested", f"Cancel requested: {REASON}.", {"reason": "environment_not_shared"}
    )
    # What the worker's telemetry sink hears at its next heartbeat: stop, as for a cancel.
    assert run_heartbeat(run_id=running, lease_owner="lease-1") == (True, True)
    # The owner's run, and the run of a user who sees every entry, go on untouched.
    assert [(r.pk, r.status, r.cancel_requested) for r in Run.objects.filter(pk__in=[own, seen_by_all]).order_by("pk")] == [
        (own, "queued", False), (seen_by_all, "queued", False)
    ]
    assert {pk: len(_events(api if pk == own else operator_api, pk)) for pk in (own, seen_by_all)} == before


def test_a_cancelled_run_cannot_resume_on_an_environment_no_longer_shared(
    api, outsider_api, shared_echo, built_model
):
    run_id = _launch(outsider_api, shared_echo.pk, "mine")
    assert outsider_api.post(f"/api/runs/{run_id}/cancel/").status_code == 200
    assert api.patch(f"/api/environments/{shared_echo.pk}/", {"shared": False}, format="json").status_code == 200
    events = _events(outsider_api, run_id)

    response = outsider_api.post(f"/api/runs/{run_id}/resume/", {}, format="json")

    assert response.status_code == 409
    assert response.json() == {"detail": f"the run cannot resume: {REASON}"}
    shown = outsider_api.get(f"/api/runs/{run_id}/").json()
    assert (shown["status"], shown["error"]) == ("cancelled", "")
    assert _events(outsider_api, run_id) == events


def test_a_queued_run_whose_environment_went_private_is_not_started_by_a_worker(
    api, outsider_api, shared_echo, built_model
):
    """Made private some other way than the service (an old row, a database edit): the claim
    a worker's task makes refuses to start it, and ends it with the reason."""
    run_id = _launch(outsider_api, shared_echo.pk, "mine")
    Environment.objects.filter(pk=shared_echo.pk).update(shared=False)

    claim = run_claim(run_id=run_id, lease_owner="lease-1", worker_name="worker-1")

    assert claim.outcome == "done"
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.error, run.lease_owner, run.attempts, run.started_at) == (
        "cancelled", REASON, "", 0, None
    )
    assert list(RunEvent.objects.filter(run_id=run_id).values_list("kind", flat=True)) == ["queued", "cancelled"]


def test_sharing_again_or_unsharing_twice_changes_no_run(api, outsider_api, shared_echo, built_model):
    run_id = _launch(outsider_api, shared_echo.pk, "mine")
    assert api.patch(f"/api/environments/{shared_echo.pk}/", {"shared": True}, format="json").status_code == 200
    assert Run.objects.get(pk=run_id).status == "queued"
    api.patch(f"/api/environments/{shared_echo.pk}/", {"shared": False}, format="json")
    events = _events(outsider_api, run_id)

    api.patch(f"/api/environments/{shared_echo.pk}/", {"shared": False}, format="json")

    assert Run.objects.get(pk=run_id).status == "cancelled"
    assert _events(outsider_api, run_id) == events


def test_the_admin_may_not_rename_to_a_bundled_name_and_unsharing_there_stops_runs_too(
    outsider_api, shared_echo, built_model, django_user_model, client
):
    run_id = _launch(outsider_api, shared_echo.pk, "mine")
    client.force_login(django_user_model.objects.create_superuser("root", password="root-pw-long-1"))
    url = f"/admin/catalog/environment/{shared_echo.pk}/change/"
    form = {
        "name": shared_echo.name, "kind": shared_echo.kind, "base_url": shared_echo.base_url,
        "owner": shared_echo.owner_id, "status": shared_echo.status, "tools": json.dumps(shared_echo.tools),
        "capacity": shared_echo.capacity, "metadata": json.dumps(shared_echo.metadata), "last_error": "",
    }

    renamed = client.post(url, {**form, "name": "Wordle", "shared": "on"})
    unshared = client.post(url, form)  # the box unticked

    assert renamed.status_code == 200
    assert html.escape("'Wordle' is reserved for the bundled environments") in renamed.content.decode()
    assert unshared.status_code == 302, unshared.content.decode()[:2000]
    shared_echo.refresh_from_db()
    assert (shared_echo.name, shared_echo.shared) == ("echo", False)
    shown = outsider_api.get(f"/api/runs/{run_id}/").json()
    assert (shown["status"], shown["error"]) == ("cancelled", REASON)
