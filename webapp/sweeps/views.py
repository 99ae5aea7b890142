"""The sweep page: members with status and their differing parameters, a chosen metric's
summary, a parallel-coordinates figure, and "Cancel the rest"."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from webapp.core.plotly import plotly_url
from webapp.runs.table import METRIC_KEY_MAX_LENGTH
from webapp.sweeps.figures import sweep_parallel_coordinates
from webapp.sweeps.selectors import (
    DEFAULT_METRIC,
    SUMMARY_STATS,
    sweep_can_change,
    sweep_status_counts,
    sweep_table,
    sweeps_visible_to,
)
from webapp.sweeps.services import sweep_cancel_rest


@login_required
def sweep_detail(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = get_object_or_404(sweeps_visible_to(user=request.user), pk=pk)
    metric = (request.GET.get("metric") or "").strip()[:METRIC_KEY_MAX_LENGTH].replace("\x00", "") or DEFAULT_METRIC
    stat = request.GET.get("stat") or "last"
    if stat not in SUMMARY_STATS:
        stat = "last"
    table = sweep_table(sweep=sweep, metric=metric)
    rows = [
        {**row, "values": [row["params"].get(path) for path in table["paths"]],
         "score": (row["summary"] or {}).get(stat)}
        for row in table["members"]
    ]
    counts = sweep_status_counts(sweep=sweep)
    return render(request, "sweeps/sweep_detail.html", {
        "sweep": sweep, "paths": table["paths"], "rows": rows, "metric": metric, "stat": stat,
        "stats": SUMMARY_STATS, "counts": counts, "pending": counts.get("pending", 0),
        "can_change": sweep_can_change(user=request.user, sweep=sweep),
        "figure": sweep_parallel_coordinates(table=table, stat=stat), "plotly_url": plotly_url(),
    })


@login_required
@require_POST
def sweep_cancel_rest_view(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = get_object_or_404(sweeps_visible_to(user=request.user), pk=pk)
    if not sweep_can_change(user=request.user, sweep=sweep):
        raise PermissionDenied("only the sweep's owner may cancel its rest")
    cancelled = sweep_cancel_rest(sweep=sweep)
    messages.success(request, f"Cancelled {len(cancelled)} pending run{'s' if len(cancelled) != 1 else ''}; running ones go on.")
    return redirect("sweep-detail", pk=sweep.pk)
