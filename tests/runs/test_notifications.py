"""Run notifications (webapp/runs/telemetry/notify.py): a real HTTP listener on loopback is the
owner's `json://` apprise target; the events are recorded by the real services
(`telemetry_record`, `run_finish`) and the light worker's task function is called as Celery
would call it. Nothing is mocked: the on-commit send to the broker is captured, not executed,
and the task is run here instead of by a worker process (tests/e2e covers a real worker)."""

from __future__ import annotations

import base64
import json

import pytest
import redis
from django.conf import settings as django_settings

from tests.factories import RunFactory
from tests.support.ports import free_port
from webapp.accounts.models import UserSecret
from webapp.accounts.secrets import user_secret_set
from webapp.runs.config import RunConfigError, parse_run_config
from webapp.runs.models import Run, RunEvent, RunNotification
from webapp.runs.services import run_finish
from webapp.runs.telemetry.notify import run_notifications_resend
from webapp.runs.telemetry.record import telemetry_record
from worker.tasks import send_run_notification

pytestmark = pytest.mark.django_db

NAN = "loss is nan at step 1: the update diverged; the weights after it are not usable."


def make_run(owner, *, notify: list[str] | None = None, status: str = Run.Status.RUNNING) -> Run:
    config = {"alerts": {"notify": notify}} if notify is not None else {}
    return RunFactory(
        owner=owner,
        name="nightly",
        config=config,
        max_steps=10,
        status=status,
        lease_owner="L",
        attempts=1,
    )


def notify_sends(callbacks: list) -> list:
    """The on-commit callbacks that hand a notification to the broker (others announce to pages)."""
    return [c for c in callbacks if c.__qualname__.startswith("run_notification_queue.")]


def nonfinite(step: int = 1) -> tuple[str, dict]:
    return ("alert", {"kind": "nonfinite", "step": step, "message": NAN, "active": True})


def test_a_nonfinite_alert_posts_once_naming_the_run_the_kind_and_the_step(
    owner, listener, django_capture_on_commit_callbacks
):
    user_secret_set(user=owner, name="notify_url", value=listener.url)
    run = make_run(owner)

    with django_capture_on_commit_callbacks(execute=False) as sends:
        telemetry_record(run_id=run.pk, lease_owner="L", events=[("metrics", (1, {"loss": 0.0})), nonfinite()])
    row = RunNotification.objects.get(run=run)
    outcome = send_run_notification(row.pk)

    assert (len(notify_sends(sends)), outcome) == (1, "sent")
    assert listener.posts == [("/hook", {
        "version": "1.0",
        "title": f"envlab run {run.pk} (nightly): alert nonfinite at step 1",
        "message": (
            f"Run {run.pk} 'nightly': alert nonfinite at step 1.\n{NAN}\n"
            f"http://127.0.0.1:8000/runs/{run.pk}/"
        ),
        "attachments": [],
        "type": "info",
    })]
    row.refresh_from_db()
    assert (row.key, row.state, row.error, row.sent_at is not None) == ("alert:nonfinite:1", "sent", "", True)
    run.refresh_from_db()
    assert run.status == "running"


def test_the_same_event_is_sent_once_whatever_is_redelivered_or_raised_again(
    owner, listener, django_capture_on_commit_callbacks
):
    """A redelivered task, a second copy of it, and a taken-over run that raises the same alert
    at the same step again: one POST."""
    user_secret_set(user=owner, name="notify_url", value=listener.url)
    run = make_run(owner)
    telemetry_record(run_id=run.pk, lease_owner="L", events=[nonfinite()])
    row = RunNotification.objects.get(run=run)

    outcomes = [send_run_notification(row.pk), send_run_notification(row.pk)]
    # The run taken over (a new lease) redoes step 1 and raises the alert there again.
    Run.objects.filter(pk=run.pk).update(lease_owner="L2", attempts=2)
    with django_capture_on_commit_callbacks(execute=False) as sends:
        telemetry_record(run_id=run.pk, lease_owner="L2", events=[nonfinite()])
    outcomes.append(send_run_notification(row.pk))

    assert outcomes == ["sent", "done", "done"]
    assert notify_sends(sends) == []
    assert len(listener.posts) == 1
    assert RunNotification.objects.filter(run=run).count() == 1
    assert RunEvent.objects.filter(run=run, kind="alert").count() == 2


def test_a_finished_run_sends_one_finished_message_when_asked(owner, listener, django_capture_on_commit_callbacks):
    user_secret_set(user=owner, name="notify_url", value=listener.url)
    run = make_run(owner, notify=["finished", "failed"])
    quiet = make_run(owner)  # the default: failed and alert, not finished

    with django_capture_on_commit_callbacks(execute=False) as sends:
        assert run_finish(run_id=run.pk, lease_owner="L", status="succeeded", step=10)
        assert run_finish(run_id=quiet.pk, lease_owner="L", status="succeeded", step=10)
    outcome = send_run_notification(RunNotification.objects.get(run=run).pk)

    assert (len(notify_sends(sends)), outcome) == (1, "sent")
    assert [(path, body["title"], body["message"]) for path, body in listener.posts] == [(
        "/hook", f"envlab run {run.pk} (nightly): finished (succeeded) at step 10",
        f"Run {run.pk} 'nightly': finished (succeeded) at step 10.\nhttp://127.0.0.1:8000/runs/{run.pk}/",
    )]
    assert list(RunNotification.objects.values_list("run_id", "key", "state")) == [
        (run.pk, "finished:attempt1", "sent")
    ]


def test_a_failed_run_says_why(owner, listener, settings):
    settings.ENVLAB_PUBLIC_URL = "https://lab.example.org"
    user_secret_set(user=owner, name="notify_url", value=listener.url)
    run = make_run(owner)

    run_finish(run_id=run.pk, lease_owner="L", status="failed", step=3, error="RuntimeError: out of patience")
    outcome = send_run_notification(RunNotification.objects.get(run=run).pk)

    assert outcome == "sent"
    assert [body["message"] for _, body in listener.posts] == [
        f"Run {run.pk} 'nightly': failed (failed) at step 3.\nRuntimeError: out of patience\n"
        f"https://lab.example.org/runs/{run.pk}/"
    ]


def test_nothing_is_queued_without_a_url(owner):
    run = make_run(owner, notify=["finished", "failed", "alert"])

    telemetry_record(run_id=run.pk, lease_owner="L", events=[nonfinite()])
    run_finish(run_id=run.pk, lease_owner="L", status="failed", step=1, error="x")

    assert RunNotification.objects.count() == 0


def test_a_dead_endpoint_leaves_the_run_alone_and_records_notify_failed(owner):
    dead = free_port()  # nothing listens there
    user_secret_set(user=owner, name="notify_url", value=f"json://127.0.0.1:{dead}/hook")
    run = make_run(owner)
    telemetry_record(run_id=run.pk, lease_owner="L", events=[nonfinite(4)])
    row = RunNotification.objects.get(run=run)

    outcomes = [send_run_notification(row.pk), send_run_notification(row.pk)]

    assert outcomes == ["failed", "done"]
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.error) == ("running", "L", "")
    row.refresh_from_db()
    assert row.state == "failed"
    event = RunEvent.objects.get(run=run, kind="notify_failed")
    assert event.data == {"notification": row.pk, "key": "alert:nonfinite:4"}
    assert event.message == (
        "The 'alert' notification could not be sent: the endpoint did not take the message "
        "(A Connection error occurred sending JSON notification to 127.0.0.1.)"
    )


def test_a_private_target_is_refused_unless_the_operator_allows_it(owner, listener, settings, api):
    settings.ENVLAB_NOTIFY_ALLOW_PRIVATE = False
    refused = api.put("/api/account/secrets/notify_url/", {"value": listener.url}, format="json")
    assert refused.status_code == 400
    assert refused.json() == {"value": [
        "the notification URL's host 127.0.0.1 is refused: loopback and private addresses need "
        "ENVLAB_NOTIFY_ALLOW_PRIVATE (it is off)"
    ]}
    assert UserSecret.objects.count() == 0
    # Stored while allowed; the operator turned it off before the send: checked again then.
    settings.ENVLAB_NOTIFY_ALLOW_PRIVATE = True
    user_secret_set(user=owner, name="notify_url", value=listener.url)
    settings.ENVLAB_NOTIFY_ALLOW_PRIVATE = False
    run = make_run(owner)
    telemetry_record(run_id=run.pk, lease_owner="L", events=[nonfinite()])

    outcome = send_run_notification(RunNotification.objects.get(run=run).pk)

    assert outcome == "failed"
    assert listener.posts == []
    assert RunEvent.objects.get(run=run, kind="notify_failed").message == (
        "The 'alert' notification could not be sent: the notification URL's host 127.0.0.1 is refused: "
        "loopback and private addresses need ENVLAB_NOTIFY_ALLOW_PRIVATE (it is off)"
    )
    # Link-local (cloud metadata) addresses are refused whatever the setting says.
    settings.ENVLAB_NOTIFY_ALLOW_PRIVATE = True
    metadata = api.put("/api/account/secrets/notify_url/", {"value": "json://169.254.169.254/"}, format="json")
    assert metadata.status_code == 400
    assert "169.254.0.0/16 (link-local, cloud metadata) are never allowed" in metadata.json()["value"][0]


def test_the_secrets_api_stores_a_notify_url_for_its_owner_only(api, outsider_api, owner, listener):
    stored = api.put("/api/account/secrets/notify_url/", {"value": listener.url}, format="json")
    unknown = api.put("/api/account/secrets/notify_url/", {"value": "nonsense://x"}, format="json")

    assert stored.status_code == 200
    assert stored.json() == {"name": "notify_url", "label": "Notification URL", "is_set": True, "last4": "hook"}
    assert unknown.status_code == 400
    assert unknown.json()["value"][0].startswith("not a notification URL apprise knows")
    assert list(UserSecret.objects.values_list("user_id", "name", "last4")) == [(owner.pk, "notify_url", "hook")]
    assert outsider_api.get("/api/account/secrets/notify_url/").json()["is_set"] is False
    assert listener.url not in api.get("/api/account/secrets/").content.decode()


def test_the_notify_list_is_validated():
    with pytest.raises(RunConfigError) as refused:
        parse_run_config({
            "name": "n", "model": "demo:echo", "environments": [{"environment": 1, "name": "e", "prompt": "p"}],
            "alerts": {"notify": ["finished", "exploded"]},
        })
    assert list(refused.value.errors) == ["alerts.notify.1"]


def test_beat_resends_a_notification_whose_task_never_reached_the_broker(owner, listener):
    user_secret_set(user=owner, name="notify_url", value=listener.url)
    run = make_run(owner)
    telemetry_record(run_id=run.pk, lease_owner="L", events=[nonfinite()])
    row = RunNotification.objects.get(run=run)
    fresh = run_notifications_resend()  # younger than a minute: its task may still be on its way
    RunNotification.objects.filter(pk=row.pk).update(created_at=row.created_at.replace(year=2020))
    broker = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
    queued_before = broker.llen("default")

    sent = run_notifications_resend()

    try:
        assert (fresh, sent, broker.llen("default") - queued_before) == (0, 1, 1)
        message = json.loads(broker.lindex("default", 0))
        assert message["headers"]["task"] == "worker.tasks.send_run_notification"
        assert json.loads(base64.b64decode(message["body"]))[0] == [row.pk]
    finally:
        broker.lpop("default")


def test_the_account_page_stores_a_notify_url_and_refuses_one_apprise_does_not_know(client, owner, listener):
    client.force_login(owner)

    refused = client.post("/account/", {"action": "set", "name": "notify_url", "value": "nonsense://x"})
    nothing = UserSecret.objects.count()
    stored = client.post("/account/", {"action": "set", "name": "notify_url", "value": listener.url})
    page = client.get("/account/").content.decode()

    assert refused.status_code == 400
    assert "not a notification URL apprise knows" in refused.content.decode()
    assert nothing == 0
    assert stored.status_code == 302
    assert '<tr data-secret="notify_url">' in page and "set (…hook)" in page
    assert listener.url not in page
