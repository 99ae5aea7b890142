"""The run page: progress, charts, events and the escaped transcript, who may read and act on
a run, and cancel and resume from the page. Live notifications go nowhere here (notify_run
logs and drops them when Redis is absent).
"""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.fixtures.accounts import grant, signed_in
from tests.webapp.pages import XSS, make_run
from webapp.runs.models import Run
from webapp.runs.services import run_mark_stale_interrupted

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_models")]


# --- the run page -----------------------------------------------------------------------------


def test_run_page_shows_progress_charts_events_and_the_escaped_transcript(
    owner_client: Client, recorded_run: Run
) -> None:
    response = owner_client.get(reverse("run-detail", args=[recorded_run.pk]))

    content = response.content.decode()
    assert response.status_code == 200
    assert XSS not in content
    escaped = html.escape(XSS)
    assert f'<pre class="message-content">{escaped}</pre>' in content
    assert (
        f'<pre class="tool-args">{html.escape(json.dumps({"message": XSS}, separators=(",", ":")))}</pre>'
        in content
    )
    assert f'<pre class="message-content">echoed {escaped}</pre>' in content
    assert '<div class="message-role">tool · echo</div>' in content
    assert '<span class="rollout-advantage">advantage -0.500</span>' in content
    assert '<li><span class="term">tool_called</span> <span class="value">—</span></li>' in content
    # Newest first, each with its seq.
    assert re.findall(r'<article class="rollout" data-seq="(\d+)" data-step="(\d+)"', content) == [
        ("4", "2"),
        ("2", "1"),
    ]
    assert (
        f'id="run-page" data-run-id="{recorded_run.pk}" data-last-seq="4" data-status="running"'
        in content
    )
    assert '<span class="badge status-running" id="run-status">running</span>' in content
    assert '<progress id="run-progress" max="30" value="2">7%</progress>' in content
    assert 'id="chart-reward" data-chart="reward" data-points="2"' in content
    assert 'id="chart-tool-calls" data-chart="tool-calls" data-points="0"' in content
    assert 'id="chart-tool-failures" data-chart="tool-failures" data-points="2"' in content
    assert "host:1 claimed the run (attempt 1)." in content
    config = re.search(r'<pre class="code" id="run-config">(.*?)</pre>', content, re.S)
    assert config and html.unescape(config.group(1)) == json.dumps(
        recorded_run.config, indent=2, sort_keys=True
    )
    assert f"&quot;note&quot;: &quot;{escaped}&quot;" in config.group(1)
    assert 'id="cancel-form">' in content
    assert 'id="resume-form" hidden' in content
    assert f'src="{reverse("plotly-js")}?v=' in content


def test_run_page_embeds_chart_and_live_json_safely(
    owner_client: Client, recorded_run: Run
) -> None:
    response = owner_client.get(reverse("run-detail", args=[recorded_run.pk]))

    content = response.content.decode()
    charts = json.loads(
        re.search(
            r'<script id="run-charts" type="application/json">(.*?)</script>', content, re.S
        ).group(1)
    )
    live = json.loads(
        re.search(
            r'<script id="run-live-config" type="application/json">(.*?)</script>', content, re.S
        ).group(1)
    )
    assert [c["id"] for c in charts] == [
        "reward",
        "tool-calls",
        "tool-failures",
        "loss",
        "time",
        "completion-length",
    ]
    assert charts[0]["keys"] == ["reward", "rewards/env_reward/mean"]
    assert charts[0]["figure"]["data"][0]["x"] == [1, 2]
    assert charts[0]["figure"]["data"][0]["y"] == [0.25, 0.5]
    assert live["run"] == recorded_run.pk
    assert live["last_seq"] == 4
    assert live["ws_path"] == f"/ws/runs/{recorded_run.pk}/"
    assert live["api_metrics"] == f"/api/runs/{recorded_run.pk}/metrics/"
    assert live["api_rollouts"] == f"/api/runs/{recorded_run.pk}/rollouts/"
    assert 19 <= live["elapsed_seconds"] <= 30
    assert re.search(r'<span id="run-elapsed">(\d+)s</span>', content)
    assert re.search(r'<span id="run-eta">(\d+m \d\ds|\d+s)</span>', content)
    assert live["eta_seconds"] == pytest.approx(live["elapsed_seconds"] / 2 * 28)


def test_another_users_run_is_not_found_even_by_staff_without_the_permission(
    outsider_client: Client, recorded_run: Run, staff: User, operator: User
) -> None:
    staff_client = signed_in(staff)
    for client in (outsider_client, staff_client):
        assert client.get(reverse("run-detail", args=[recorded_run.pk])).status_code == 404
        assert client.post(reverse("run-cancel", args=[recorded_run.pk])).status_code == 404
        assert client.post(reverse("run-resume", args=[recorded_run.pk])).status_code == 404
    recorded_run.refresh_from_db()
    assert (recorded_run.status, recorded_run.cancel_requested) == (Run.Status.RUNNING, False)

    assert signed_in(operator).get(reverse("run-detail", args=[recorded_run.pk])).status_code == 200


def test_a_viewer_sees_a_run_but_may_not_cancel_it(recorded_run: Run) -> None:
    viewer = grant(User.objects.create_user("viewer", is_staff=True), "runs.view_run")
    client = signed_in(viewer)

    page = client.get(reverse("run-detail", args=[recorded_run.pk]))
    cancel = client.post(reverse("run-cancel", args=[recorded_run.pk]))
    resume = client.post(reverse("run-resume", args=[recorded_run.pk]))

    assert page.status_code == 200
    assert 'id="cancel-form"' not in page.content.decode()
    assert (cancel.status_code, resume.status_code) == (403, 403)
    assert (
        '<p id="forbidden-reason">only the run&#x27;s owner, or a user with the permission '
        "runs.change_run, may cancel or resume it</p>"
    ) in cancel.content.decode()
    recorded_run.refresh_from_db()
    assert (recorded_run.status, recorded_run.cancel_requested) == (Run.Status.RUNNING, False)


def test_reading_a_run_page_writes_nothing_and_shows_the_sweep_s_verdict(
    owner_client: Client, owner: User
) -> None:
    """Reads never write: a stale run stays running until beat's sweep (every 30 s) marks it;
    the page then shows it interrupted, with resume offered."""
    run = make_run(
        owner, status=Run.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(hours=1)
    )

    before = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert '<span class="badge status-running" id="run-status">running</span>' in before

    assert run_mark_stale_interrupted() == 1  # what beat's sweep_stale_runs calls
    content = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()

    run.refresh_from_db()
    assert run.status == Run.Status.INTERRUPTED
    assert '<span class="badge status-interrupted" id="run-status">interrupted</span>' in content
    assert 'id="cancel-form" hidden' in content
    assert 'id="resume-form">' in content


def test_cancel_a_queued_run_then_resume_it(owner_client: Client, owner: User) -> None:
    run = make_run(owner)

    cancelled = owner_client.post(reverse("run-cancel", args=[run.pk]), follow=True)

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert "Run cancelled." in cancelled.content.decode()

    resumed = owner_client.post(reverse("run-resume", args=[run.pk]), follow=True)

    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert "Resume queued." in resumed.content.decode()
    assert list(run.events.order_by("id").values_list("kind", flat=True)) == [
        "cancelled",
        "resumed",
    ]


def test_resume_of_a_running_run_is_refused_with_a_message(
    owner_client: Client, recorded_run: Run
) -> None:
    response = owner_client.post(reverse("run-resume", args=[recorded_run.pk]), follow=True)

    recorded_run.refresh_from_db()
    assert recorded_run.status == Run.Status.RUNNING
    assert "Cannot resume: only interrupted, cancelled or infrastructure-failed runs resume; this one is running." in (
        response.content.decode()
    )


def test_cancel_a_running_run_requests_a_cooperative_stop(
    owner_client: Client, recorded_run: Run
) -> None:
    response = owner_client.post(reverse("run-cancel", args=[recorded_run.pk]), follow=True)

    recorded_run.refresh_from_db()
    content = response.content.decode()
    assert (recorded_run.status, recorded_run.cancel_requested) == (Run.Status.RUNNING, True)
    assert "Cancel requested" in content
    assert 'id="cancel-form" hidden' in content
