"""Run notifications: a message to the owner's `notify_url` (apprise) when a run finishes,
fails or raises a health alert, as the run's `alerts.notify` asks (default: failed and alert).

Exactly once per event: the row (run, event identity) is made in the transaction that records
the event (`run_finish`, `telemetry_record`), and its send is enqueued on commit by name to the
light worker (the `default` queue); the training process never sends. An alert raised again at
the same step by a resumed or taken-over run finds its row and queues nothing. The task sends
only a pending row it moved to `sending` itself, so a redelivered or repeated task sends
nothing; beat re-sends the task of a row left pending (the broker was away at the commit).
A worker lost in the middle of a send leaves the row `sending`: never sent twice, at the cost
of that one message. A send that fails marks the row failed and records a `notify_failed`
run event; the run itself is never touched.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.urls import reverse
from django.utils import timezone
from pydantic import ValidationError

from webapp.accounts.models import UserSecret
from webapp.accounts.secrets import user_secret_value
from webapp.core.notify_urls import NotifyUrlRefused, notify_url_check
from webapp.runs.config import AlertSettings
from webapp.runs.models import Run, RunEvent, RunNotification
from webapp.runs.selectors import run_live_note
from webapp.runs.telemetry.live import notify_run

log = logging.getLogger(__name__)

# Sent by name: webapp code does not import the worker's task module. Routed to the light
# `default` queue (CELERY_TASK_ROUTES' "worker.tasks.*").
NOTIFY_TASK = "worker.tasks.send_run_notification"
NOTIFY_FAILED = "notify_failed"
# A pending row older than this whose task never came is sent again by beat.
RESEND_AFTER = timedelta(seconds=60)
_TEXT = 500


def _wanted(run: Run) -> list[str]:
    try:
        return list(AlertSettings.model_validate((run.config or {}).get("alerts") or {}).notify)
    except (ValidationError, AttributeError):  # a config the launch accepted; only the default then
        return list(AlertSettings().notify)


def run_notification_queue(*, run_id: int, event: str, key: str, data: dict[str, Any]) -> RunNotification | None:
    """Inside the transaction that records the event: the notification row for `key`, its send
    enqueued on commit; None when the run does not ask for `event`, its owner stored no URL, or
    the row exists (this event was queued before)."""
    run = Run.objects.filter(pk=run_id).only("pk", "owner_id", "config").first()
    if run is None or event not in _wanted(run):
        return None
    if not UserSecret.objects.filter(user_id=run.owner_id, name=UserSecret.Name.NOTIFY_URL).exists():
        return None
    row, created = RunNotification.objects.get_or_create(
        run_id=run_id, key=key[:96], defaults={"data": {"event": event, **data}}
    )
    if not created:
        return None
    notification_id = row.pk
    transaction.on_commit(lambda: _send_task(notification_id))
    return row


def run_notify_end(*, run_id: int, status: str, step: int | None, error: str) -> None:
    """The run ended (inside run_finish's transaction): `finished` or `failed`, once per attempt."""
    event = "finished" if status == Run.Status.SUCCEEDED else "failed" if status == Run.Status.FAILED else None
    if event is None:
        return
    attempt = Run.objects.filter(pk=run_id).values_list("attempts", flat=True).first() or 0
    run_notification_queue(
        run_id=run_id, event=event, key=f"{event}:attempt{attempt}",
        data={"status": status, "step": step, "message": error[:_TEXT]},
    )


def run_notify_alert(*, run_id: int, alert: str, step: int, message: str) -> None:
    """A health alert was raised (inside telemetry_record's transaction): once per (kind, step)."""
    run_notification_queue(
        run_id=run_id, event="alert", key=f"alert:{alert}:{step}",
        data={"alert": alert, "step": step, "message": message[:_TEXT]},
    )


def _send_task(notification_id: int) -> bool:
    """Hand the send to the broker. Unreachable: the row stays pending and beat sends it again."""
    from kombu.exceptions import OperationalError

    from webapp import celery_app  # the project's Celery app: imports no torch

    try:
        celery_app.send_task(NOTIFY_TASK, args=(notification_id,))
        return True
    except (OperationalError, OSError) as exc:
        log.warning("notification %s: the broker is unreachable (%s); beat sends it again", notification_id, exc)
        return False


def run_notifications_resend() -> int:
    """Send again the task of notifications left pending past RESEND_AFTER (beat). The task
    sends a row once whatever number of copies arrive."""
    before = timezone.now() - RESEND_AFTER
    ids = list(
        RunNotification.objects.filter(state=RunNotification.State.PENDING, created_at__lt=before)
        .order_by("pk").values_list("pk", flat=True)[:500]
    )
    return sum(_send_task(pk) for pk in ids)


def run_page_url(run_id: int) -> str:
    return f"{settings.ENVLAB_PUBLIC_URL}{reverse('run-detail', args=[run_id])}"


def notification_text(*, run: Run, data: dict[str, Any]) -> tuple[str, str]:
    """(title, body) of a notification: the run's id and name, what happened, and its page."""
    event = data.get("event")
    step = data.get("step")
    message = str(data.get("message") or "")
    if event == "alert":
        what = f"alert {data.get('alert')} at step {step}"
        detail = message
    else:
        what = f"{event} ({data.get('status')})" + (f" at step {step}" if step is not None else "")
        detail = message if event == "failed" else ""
    title = f"envlab run {run.pk} ({run.name}): {what}"
    body = "\n".join(part for part in (f"Run {run.pk} '{run.name}': {what}.", detail, run_page_url(run.pk)) if part)
    return title, body


def _deliver(plugin: Any, *, title: str, body: str, secret: str) -> str | None:
    """Send through apprise; None when the endpoint took it, else why not (without the URL)."""
    import apprise

    sender = apprise.Apprise()
    sender.add(plugin)
    with apprise.LogCapture(level=logging.WARNING, fmt="%(message)s") as captured:
        ok = sender.notify(title=title, body=body)
        said = captured.getvalue() if hasattr(captured, "getvalue") else ""
    if ok:
        return None
    first = next((line.strip() for line in str(said).splitlines() if line.strip()), "")
    first = first.replace(secret, "<notify_url>")[:300]
    return f"the endpoint did not take the message ({first})" if first else "the endpoint did not take the message"


def run_notification_send(*, notification_id: int) -> str:
    """Send one notification (the light worker's task). Returns what happened: "sent",
    "failed", or "done" when the row was not pending (sent, being sent, failed or gone)."""
    taken = RunNotification.objects.filter(pk=notification_id, state=RunNotification.State.PENDING).update(
        state=RunNotification.State.SENDING
    )
    if not taken:
        return "done"
    row = RunNotification.objects.select_related("run", "run__owner").get(pk=notification_id)
    url = user_secret_value(user=row.run.owner, name=UserSecret.Name.NOTIFY_URL)
    if not url:
        return _failed(row, "no notification URL is stored any more")
    try:
        plugin = notify_url_check(url, resolve=True)
    except NotifyUrlRefused as exc:
        return _failed(row, str(exc))
    title, body = notification_text(run=row.run, data=row.data)
    try:
        refused = _deliver(plugin, title=title, body=body, secret=url)
    except Exception as exc:  # a plugin's own error: the message is lost, the run goes on
        log.warning("notification %s: apprise raised %s", notification_id, type(exc).__name__)
        refused = f"sending raised {type(exc).__name__}"
    if refused is not None:
        return _failed(row, refused)
    RunNotification.objects.filter(pk=row.pk).update(state=RunNotification.State.SENT, sent_at=timezone.now())
    return "sent"


def _failed(row: RunNotification, reason: str) -> str:
    what = row.data.get("event", "")
    with transaction.atomic():
        RunNotification.objects.filter(pk=row.pk).update(state=RunNotification.State.FAILED, error=reason[:2000])
        RunEvent.objects.create(
            run_id=row.run_id, kind=NOTIFY_FAILED,
            message=f"The '{what}' notification could not be sent: {reason}"[:2000],
            data={"notification": row.pk, "key": row.key},
        )
    try:
        note = run_live_note(run_id=row.run_id, kind="facts")
    except DatabaseError:
        note = None
    if note is not None:
        notify_run(row.run_id, note)
    return "failed"
