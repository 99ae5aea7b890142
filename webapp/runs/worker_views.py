"""The workers page: the fleet as its heartbeats describe it, and where queued runs wait."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from webapp.runs.models import WorkerHeartbeat
from webapp.runs.selectors import runs_visible_to
from webapp.runs.workers import queued_runs, run_waiting_reason, worker_facts


@login_required
def worker_list(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    visible = runs_visible_to(user=request.user)
    workers = [worker_facts(worker, now=now) for worker in WorkerHeartbeat.objects.order_by("name")]
    # Which run a worker trains is shown only to those who may see that run.
    busy = {w["current_run_id"] for w in workers if w["current_run_id"] is not None}
    shown = set(visible.filter(pk__in=busy).values_list("pk", flat=True))
    for worker in workers:
        if worker["current_run_id"] not in shown:
            worker["current_run_id"] = None
    queued = [
        {"run": item.run, "queue": item.queue, "position": item.position, "waiting": run_waiting_reason(run=item.run)}
        for item in queued_runs(runs=visible)
    ]
    return render(request, "runs/workers.html", {"nav": "workers", "workers": workers, "queued": queued})
