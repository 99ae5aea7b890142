"""The run comparison page: /runs/compare/?run=1&run=2&key=reward&key=loss&group_by=config.grpo.seed."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from webapp.core.plotly import plotly_url
from webapp.evaluations.arena.compare import (
    CompareError,
    compare_figure,
    compare_series,
    compare_wall_times,
    comparison_parse,
    config_diff,
)
from webapp.runs.models import Run
from webapp.runs.selectors import runs_visible_to
from webapp.runs.telemetry.groups import BANDS, group_figure, group_stats
from webapp.runs.telemetry.layout import MAX_SMOOTHING

DEFAULT_KEY = "reward"


@login_required
def run_compare(request: HttpRequest) -> HttpResponse:
    context: dict = {"nav": "runs", "error": None, "bands": BANDS}
    visible = runs_visible_to(user=request.user)
    try:
        comparison = comparison_parse(
            visible=visible, params=request.GET, default_key=DEFAULT_KEY, lenient_keys=True
        )
    except CompareError as exc:
        context["error"] = str(exc)
        return render(request, "runs/compare.html", context, status=400)
    if comparison.unknown_keys:
        # Say so, and show the metrics they did log.
        context["error"] = f"none of these runs logged '{comparison.unknown_keys[0][:120]}'"
    runs = comparison.runs
    charts = []
    for index, key in enumerate(comparison.shown):
        series = compare_series(runs, key=key)
        figure = (
            group_figure(group_stats(series, comparison.groups), key=key, band=comparison.band)
            if comparison.group_by
            else compare_figure(runs, series, key=key)
        )
        charts.append({
            "key": key,
            "figure": figure,
            "chart_id": "compare-chart" if index == 0 else f"compare-chart-{index}",
            "figure_id": "compare-figure" if index == 0 else f"compare-figure-{index}",
        })
    diff = config_diff(runs)
    context.update({
        "runs": runs,
        "keys": comparison.keys,
        "key": comparison.shown[0],
        "shown": comparison.shown,
        "charts": charts,
        "group_by": comparison.group_by,
        "groups": comparison.groups,
        "band": comparison.band,
        "diff": [{"key": item["key"], "values": [_shown(v) for v in item["values"]]} for item in diff],
        "plotly_url": plotly_url(),
        "compare_page": {
            # Smoothing's step scale (webapp/static/js/run_charts.js): the longest of the runs.
            "span": max((run.max_steps for run in runs), default=0),
            "max_smoothing": MAX_SMOOTHING,
            # While one of the runs trains, the page re-reads the same comparison from the API.
            "api": reverse("api-run-compare") + "?" + request.GET.urlencode(),
            "active_statuses": [str(status) for status in Run.ACTIVE],
            "active": any(run.status in Run.ACTIVE for run in runs),
            # Each run's step -> wall time, for the x-axis choice; a group's mean has no one
            # wall time, so grouped charts are by step.
            "grouped": bool(comparison.group_by),
            "wall_time": {} if comparison.group_by else compare_wall_times(runs),
        },
    })
    return render(request, "runs/compare.html", context, status=200 if context["error"] is None else 400)


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
