"""The run comparison page: /runs/compare/?run=1&run=2&key=reward."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.core.plotly import plotly_url
from webapp.evaluations.arena.compare import (
    CompareError,
    compare_figure,
    compare_keys,
    compare_runs,
    compare_series,
    config_diff,
)
from webapp.runs.selectors import runs_visible_to

DEFAULT_KEY = "reward"


@login_required
def run_compare(request: HttpRequest) -> HttpResponse:
    context: dict = {"nav": "runs", "error": None}
    try:
        runs = compare_runs(visible=runs_visible_to(user=request.user), ids=request.GET.getlist("run"))
    except CompareError as exc:
        context["error"] = str(exc)
        return render(request, "runs/compare.html", context, status=400)
    keys = compare_keys(runs)
    key = request.GET.get("key") or (DEFAULT_KEY if DEFAULT_KEY in keys or not keys else keys[0])
    if key not in keys:
        context["error"] = f"none of these runs logged '{key[:120]}'"
        key = keys[0] if keys else DEFAULT_KEY
    diff = config_diff(runs)
    context.update({
        "runs": runs,
        "keys": keys,
        "key": key,
        "figure": compare_figure(runs, compare_series(runs, key=key), key=key),
        "diff": [{"key": item["key"], "values": [_shown(v) for v in item["values"]]} for item in diff],
        "plotly_url": plotly_url(),
    })
    return render(request, "runs/compare.html", context, status=200 if context["error"] is None else 400)


def _shown(value: object) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
