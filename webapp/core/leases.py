"""The lease that keeps one worker on one row: a run, an evaluation or a background job
(each a model with `status`, `lease_owner` and `heartbeat_at`). A worker claims a row with one
conditional UPDATE when it is queued, or running under a heartbeat gone stale (its worker died:
the claim takes it over); the holder renews it while it works; the sweepers end rows whose
holder vanished and that nobody took over (later than the takeover threshold, so a redelivered
task gets the first chance). Each app's services add what its rows need around these."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Model, Q
from django.utils import timezone

from webapp.core.models import SweepWatch


def new_lease_owner() -> str:
    return uuid.uuid4().hex


def stale_before(seconds: float | None = None) -> datetime:
    """Heartbeats older than this are stale (default: the takeover threshold)."""
    return timezone.now() - timedelta(seconds=seconds or settings.ENVLAB_STALE_SECONDS)


def interrupt_before() -> datetime:
    """Heartbeats older than this end the row (the sweepers' threshold)."""
    return stale_before(settings.ENVLAB_INTERRUPT_SECONDS)


def claimable(model: type[Model], *, before: datetime | None = None) -> Q:
    """Rows a worker may claim: queued, or running under a heartbeat older than `before`
    (default: stale now) or none. A caller that also asks whether the row was running passes
    one `before` to both questions, so that the two agree at the staleness boundary."""
    running = model.Status.RUNNING  # type: ignore[attr-defined]
    return (
        Q(status=model.Status.QUEUED)  # type: ignore[attr-defined]
        | Q(status=running, heartbeat_at__lt=before or stale_before())
        | Q(status=running, heartbeat_at__isnull=True)
    )


def held(model: type[Model], *, pk: int, lease_owner: str) -> Any:
    """The row, as a queryset, while `lease_owner` holds its lease."""
    return model.objects.filter(pk=pk, lease_owner=lease_owner, status=model.Status.RUNNING)  # type: ignore[attr-defined]


def renew(model: type[Model], *, pk: int, lease_owner: str, cancel: bool = False, **fields: Any) -> tuple[bool, bool]:
    """Renew the lease (and set `fields`). Returns (still ours, cancel requested); the second
    is read only with `cancel` (the model has `cancel_requested`)."""
    changed = held(model, pk=pk, lease_owner=lease_owner).update(heartbeat_at=timezone.now(), **fields)
    if changed != 1:
        return False, False
    if not cancel:
        return True, False
    requested = model._default_manager.filter(pk=pk).values_list("cancel_requested", flat=True).first()
    return True, bool(requested)


def claim_refused(row: Any, task_id: str = "") -> str:
    """Why a claim that changed nothing failed: "busy" (alive under another lease: this message
    may take it over if that worker dies), "duplicate" (another message claimed it: this copy
    has nothing to do) or "done"."""
    if row is not None and row.status == type(row).Status.RUNNING:
        if task_id and getattr(row, "claim_task_id", "") and row.claim_task_id != task_id:
            return "duplicate"
        return "busy"
    return "done"


def sweep_watch(*, name: str, period_seconds: float) -> datetime:
    """Record one sweep and return since when the sweeper has seen the database without a gap.

    A sweep that cannot reach the database records nothing, so the first one after an outage
    finds its previous sweep more than one and a half periods back and starts watching anew.
    An outage between two sweeps that succeeded is shorter than one period. Row ends that rest
    on heartbeats wait until the watch is `ENVLAB_INTERRUPT_SECONDS` old: until then a stale
    heartbeat may only mean the worker could not reach the database either (its heartbeat
    thread renews the lease within a second or two of the database's return)."""
    now = timezone.now()
    with transaction.atomic():
        watch, created = SweepWatch.objects.select_for_update().get_or_create(
            name=name, defaults={"since": now, "seen_at": now}
        )
        if not created:
            if now - watch.seen_at > timedelta(seconds=1.5 * period_seconds):
                watch.since = now
            watch.seen_at = now
            watch.save(update_fields=["since", "seen_at"])
    return watch.since


def heartbeats_are_evidence(watching_since: datetime) -> bool:
    """Whether the sweeper has watched long enough for a stale heartbeat to mean a dead worker."""
    return watching_since <= interrupt_before()
