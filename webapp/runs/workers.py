"""Reads about the worker fleet: who was seen lately, what they carry, who can take a run, and
where each queued run waits (webapp/runs/routing.py decides the queues)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from webapp.runs.config import RunConfig
from webapp.runs.models import Run, WorkerHeartbeat
from webapp.runs.routing import Needs, can_carry, queues_for, run_needs, start_hint, stored_needs


def _seen_since() -> datetime:
    return timezone.now() - timedelta(seconds=settings.ENVLAB_WORKER_SEEN_SECONDS)


def workers_seen() -> QuerySet[WorkerHeartbeat]:
    """Workers whose heartbeat is recent enough to count on them (ENVLAB_WORKER_SEEN_SECONDS)."""
    return WorkerHeartbeat.objects.filter(heartbeat_at__gte=_seen_since())


def _seen_minutes() -> str:
    minutes = settings.ENVLAB_WORKER_SEEN_SECONDS / 60
    return f"{minutes:g} minute{'s' if minutes != 1 else ''}"


def needs_refusal(needs: Needs) -> str | None:
    """Why no recently seen worker can carry `needs`, or None when one can.

    CPU runs are never refused: any worker carries them, and a lab whose one worker is still
    starting (no heartbeat yet) must not refuse its first run; they wait in `train`."""
    if not needs.gpus:
        return None
    if any(can_carry(worker.capabilities, needs) for worker in workers_seen().only("capabilities")):
        return None
    return (
        f"no worker with {needs.describe()} has been seen in the last {_seen_minutes()}; "
        f"{start_hint(needs)}, or set \"wait_for_worker\": true to queue the run until one comes"
    )


def run_worker_refusal(*, config: RunConfig) -> str | None:
    return needs_refusal(run_needs(config))


def run_waiting_reason(*, run: Run) -> str | None:
    """For a queued run that no recently seen worker can carry: why it waits."""
    if run.status != Run.Status.QUEUED:
        return None
    needs = stored_needs(run)
    reason = needs_refusal(needs)
    if reason is None:
        return None
    return f"waiting: no worker with {needs.describe()} has been seen in the last {_seen_minutes()}"


@dataclass(frozen=True)
class QueuedRun:
    run: Run
    queue: str
    position: int  # 1: next in its queue


def queued_runs(*, runs: QuerySet[Run]) -> list[QueuedRun]:
    """Queued runs (of those given) with their queue and their place in it, oldest first.
    Positions count every queued run of the queue, seen by the caller or not."""
    queued = list(Run.objects.filter(status=Run.Status.QUEUED).order_by("created_at", "id").only("id", "queue"))
    counters: dict[str, int] = {}
    places: dict[int, tuple[str, int]] = {}
    for item in queued:
        queue = item.queue
        counters[queue] = counters.get(queue, 0) + 1
        places[item.pk] = (queue, counters[queue])
    shown = runs.filter(pk__in=list(places)).select_related("owner").order_by("created_at", "id")
    return [QueuedRun(run, *places[run.pk]) for run in shown]


def _consumed(capabilities: dict[str, Any]) -> list[str]:
    consumes = capabilities.get("consumes")
    return [str(q)[:64] for q in consumes[:32]] if isinstance(consumes, list) else []


def worker_facts(worker: WorkerHeartbeat, *, now: datetime | None = None) -> dict[str, Any]:
    """What the workers page shows of one worker, from its heartbeat."""
    capabilities = worker.capabilities if isinstance(worker.capabilities, dict) else {}
    now = now or timezone.now()
    gpus = found if isinstance(found := capabilities.get("gpus"), list) else []
    return {
        "name": worker.name,
        "host": worker.name.split("@", 1)[-1],
        "age_seconds": max(0.0, (now - worker.heartbeat_at).total_seconds()),
        "seen": worker.heartbeat_at >= _seen_since(),
        # What it reads (its -Q), where it says so; else what its capabilities would carry.
        "queues": _consumed(capabilities) or queues_for(capabilities),
        "cuda_devices": capabilities.get("cuda_devices", 0),
        "gpus": [gpu for gpu in gpus if isinstance(gpu, dict)],
        "vllm": capabilities.get("vllm_version") or ("yes" if capabilities.get("vllm") is True else "no"),
        "cpu_count": capabilities.get("cpu_count"),
        "fake": capabilities.get("fake") is True,
        "current_run_id": worker.current_run_id,
    }

