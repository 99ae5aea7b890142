"""The Django admin: its lists render with rows, and its actions need the change permission.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from tests.fixtures.accounts import grant, signed_in
from tests.webapp.pages import XSS, make_run
from webapp.catalog.models import Environment
from webapp.runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_models")]


# --- admin ------------------------------------------------------------------------------------


@pytest.fixture
def admin_client_logged_in(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw-root-123"))
    return client


def test_admin_lists_render_with_rows(
    admin_client_logged_in: Client, recorded_run: Run, echo_env: Environment
) -> None:
    from webapp.runs.models import WorkerHeartbeat

    WorkerHeartbeat.objects.create(
        name="w1",
        capabilities={"cuda_devices": 1, "vllm": False},
        heartbeat_at=timezone.now(),
        current_run=recorded_run,
    )
    for model in [
        "runs/run",
        "runs/metricpoint",
        "runs/rollout",
        "runs/runevent",
        "runs/workerheartbeat",
        "catalog/environment",
        "catalog/bundledserver",
    ]:
        response = admin_client_logged_in.get(f"/admin/{model}/?q=my")
        assert response.status_code == 200, model
    run_page = admin_client_logged_in.get(f"/admin/runs/run/{recorded_run.pk}/change/")
    assert run_page.status_code == 200
    assert XSS not in run_page.content.decode()
    rollout = recorded_run.rollouts.first()
    assert (
        admin_client_logged_in.get(f"/admin/runs/rollout/{rollout.pk}/change/").status_code == 200
    )
    assert admin_client_logged_in.get("/admin/runs/rollout/add/").status_code == 403


def test_admin_action_cancels_selected_runs(
    admin_client_logged_in: Client, owner: User, recorded_run: Run
) -> None:
    queued = make_run(owner, name="queued")
    finished = make_run(owner, name="done", status=Run.Status.SUCCEEDED)

    response = admin_client_logged_in.post(
        "/admin/runs/run/",
        {
            "action": "cancel_selected",
            "_selected_action": [queued.pk, recorded_run.pk, finished.pk],
        },
        follow=True,
    )

    assert (
        "1 queued run(s) cancelled; cancel requested for 1 running run(s)."
        in response.content.decode()
    )
    queued.refresh_from_db()
    recorded_run.refresh_from_db()
    finished.refresh_from_db()
    assert queued.status == Run.Status.CANCELLED
    assert (recorded_run.status, recorded_run.cancel_requested) == (Run.Status.RUNNING, True)
    assert (finished.status, finished.cancel_requested) == (Run.Status.SUCCEEDED, False)


def test_admin_actions_need_the_change_permission(
    owner: User, recorded_run: Run, echo_env: Environment
) -> None:
    viewer = grant(
        User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True),
        "runs.view_run",
        "catalog.view_environment",
    )
    client = signed_in(viewer)
    queued = make_run(owner, name="queued")

    runs = client.get("/admin/runs/run/")
    environments = client.get("/admin/catalog/environment/")
    cancel = client.post("/admin/runs/run/", {"action": "cancel_selected", "_selected_action": [queued.pk]})
    probe = client.post(
        "/admin/catalog/environment/", {"action": "probe_selected", "_selected_action": [echo_env.pk]}
    )

    assert (runs.status_code, environments.status_code, cancel.status_code, probe.status_code) == (200,) * 4
    assert 'value="cancel_selected"' not in runs.content.decode()
    assert 'value="probe_selected"' not in environments.content.decode()
    assert 'value="stop_containers"' not in environments.content.decode()
    queued.refresh_from_db()
    echo_env.refresh_from_db()
    assert (queued.status, echo_env.status) == (Run.Status.QUEUED, Environment.Status.HEALTHY)
