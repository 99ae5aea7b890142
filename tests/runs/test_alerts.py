"""Run health alerts as the web shows them: recorded as run events by the worker's
telemetry, folded by `run_alerts`, in the API, the run page, the run list and the admin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.factories import RunFactory
from webapp.runs.models import Run, RunEvent
from webapp.runs.selectors import run_alerts, run_status_display
from webapp.runs.telemetry.record import telemetry_record

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


def make_run(owner: User, status: str = Run.Status.RUNNING) -> Run:
    return RunFactory(owner=owner, name="r", max_steps=10, status=status, lease_owner="L")


def alert(kind: str, step: int, message: str, active: bool = True) -> tuple[str, dict]:
    return ("alert", {"kind": kind, "step": step, "message": message, "active": active})


def test_telemetry_records_alerts_as_run_events(owner):
    run = make_run(owner)

    telemetry_record(run_id=run.pk, lease_owner="L", events=[
        ("metrics", (3, {"reward": 0.0})), alert("zero_variance", 3, "teach nothing"),
    ])

    assert list(RunEvent.objects.filter(run=run).values_list("kind", "message", "data")) == [
        ("alert", "teach nothing", {"alert": "zero_variance", "step": 3, "active": True}),
    ]
    run.refresh_from_db()
    assert (run.last_seq, run.step) == (1, 3)


def test_alerts_fold_raise_clear_and_a_new_attempt(owner):
    run = make_run(owner)
    RunEvent.objects.create(run=run, kind="started", message="Training from step 0.")
    telemetry_record(run_id=run.pk, lease_owner="L", events=[
        alert("zero_variance", 5, "zv"), alert("tool_failures", 6, "tf"),
        alert("zero_variance", 7, "cleared at step 7: zv", active=False),
    ])
    assert run_alerts(run=run) == [
        {"kind": "zero_variance", "step": 5, "message": "zv", "active": False},
        {"kind": "tool_failures", "step": 6, "message": "tf", "active": True},
    ]
    # A resumed attempt checks from scratch: what the last one left active is not any more.
    RunEvent.objects.create(run=run, kind="started", message="Training from step 5.")
    assert [a["active"] for a in run_alerts(run=run)] == [False, False]


def test_status_display(owner):
    run = make_run(owner, Run.Status.SUCCEEDED)
    assert run_status_display(run=run) == "succeeded"
    RunEvent.objects.create(run=run, kind="alert", message="m", data={"alert": "reward_flat", "step": 2, "active": True})
    assert run_status_display(run=run) == "succeeded, with warnings"
    run.status = Run.Status.FAILED
    assert run_status_display(run=run) == "failed"


def test_api_detail_and_list_carry_alerts(api, outsider_api, owner):
    run = make_run(owner, Run.Status.SUCCEEDED)
    RunEvent.objects.create(run=run, kind="alert", message="m", data={"alert": "reward_flat", "step": 2, "active": True})
    quiet = make_run(owner, Run.Status.SUCCEEDED)

    body = api.get(f"/api/runs/{run.pk}/").json()
    listed = {r["id"]: r for r in api.get("/api/runs/").json()}

    expected = [{"kind": "reward_flat", "step": 2, "message": "m", "active": True}]
    assert (body["status"], body["status_display"], body["alerts"]) == ("succeeded", "succeeded, with warnings", expected)
    assert (listed[run.pk]["status_display"], listed[run.pk]["alerts"]) == ("succeeded, with warnings", expected)
    assert (listed[quiet.pk]["status_display"], listed[quiet.pk]["alerts"]) == ("succeeded", [])
    assert outsider_api.get(f"/api/runs/{run.pk}/").status_code == 404


def test_run_page_banner_and_home_badge_escape_the_message(owner):
    run = make_run(owner, Run.Status.SUCCEEDED)
    RunEvent.objects.create(
        run=run, kind="alert", message=f"most failures in '{XSS}'", data={"alert": "tool_failures", "step": 4, "active": True}
    )
    client = Client()
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/").content.decode()
    home = client.get("/").content.decode()

    escaped = "most failures in &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;"
    assert XSS not in page and XSS not in home
    assert '<section class="card alert-banner" id="run-alerts" role="alert">' in page
    assert f'<li class="run-alert" data-kind="tool_failures"><strong>tool_failures</strong> (step 4): {escaped}</li>' in page
    assert '<span class="badge status-succeeded" id="run-status">succeeded, with warnings</span>' in page
    assert '<span class="badge status-succeeded">succeeded, with warnings</span>' in home
    assert f'<span class="badge alert-badge" title="{escaped}">1 alert</span>' in home


def test_run_page_without_alerts_has_no_banner(owner):
    run = make_run(owner, Run.Status.SUCCEEDED)
    client = Client()
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-alerts"' not in page
    assert '<span class="badge status-succeeded" id="run-status">succeeded</span>' in page


def test_admin_list_shows_alerts(owner):
    run = make_run(owner, Run.Status.SUCCEEDED)
    RunEvent.objects.create(run=run, kind="alert", message="m", data={"alert": "reward_flat", "step": 2, "active": True})
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw-root-123"))

    content = client.get("/admin/runs/run/").content.decode()

    assert '<td class="field-health_status">succeeded, with warnings</td>' in content
    assert '<td class="field-health_alerts">reward_flat</td>' in content
