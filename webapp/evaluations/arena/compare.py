"""Comparing runs: one metric of 2-6 runs on shared axes, and what differs between their configs.

Pure reads (selector output) and a pure figure function, used by the compare page and
`GET /api/runs/compare/`.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from webapp.runs.config import stored_config_current
from webapp.runs.models import Run
from webapp.runs.telemetry.series import run_metric_keys, run_metric_series

MIN_RUNS, MAX_RUNS = 2, 6
COMPARE_POINTS = 500
MISSING = "—"


class CompareError(ValueError):
    pass


def compare_runs(*, visible: QuerySet[Run], ids: list[str]) -> list[Run]:
    """The runs named by `ids`, in the order given, each visible to the caller. Raises
    CompareError naming what is wrong; an id the caller may not see reads as unknown."""
    try:
        wanted = list(dict.fromkeys(int(value) for value in ids))
    except ValueError:
        raise CompareError("run ids are whole numbers") from None
    if not MIN_RUNS <= len(wanted) <= MAX_RUNS:
        raise CompareError(f"pick {MIN_RUNS} to {MAX_RUNS} different runs to compare, not {len(wanted)}")
    found = {run.pk: run for run in visible.filter(pk__in=wanted)}
    missing = [str(pk) for pk in wanted if pk not in found]
    if missing:
        raise CompareError(f"no run with id {', '.join(missing)}")
    return [found[pk] for pk in wanted]


def compare_keys(runs: list[Run]) -> list[str]:
    """Metric keys any of the runs logged, sorted; the ones they all logged are the better picks."""
    keys: set[str] = set()
    for run in runs:
        keys.update(run_metric_keys(run=run))
    return sorted(keys)


def compare_series(runs: list[Run], *, key: str) -> dict[int, list[list[float]]]:
    return {
        run.pk: run_metric_series(run=run, keys=[key], max_points=COMPARE_POINTS).get(key, []) for run in runs
    }


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key in sorted(value):
            out.update(_flatten(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return out or ({prefix: {}} if prefix else {})
    return {prefix: value}


def config_diff(runs: list[Run]) -> list[dict[str, Any]]:
    """Every dotted config key whose value is not the same in all runs: `{key, values}` with
    one value per run (MISSING where a run's config lacks the key). Lists compare whole."""
    # Configs stored before a key was renamed compare under today's name.
    flat = [_flatten(stored_config_current(run.config) if isinstance(run.config, dict) else {}) for run in runs]
    keys = sorted(set().union(*flat))
    diff = []
    for key in keys:
        values = [config.get(key, MISSING) for config in flat]
        if any(value != values[0] for value in values[1:]):
            diff.append({"key": key, "values": values})
    return diff


def plain_label(text: str) -> str:
    """Plotly reads <b>, <a href> and similar tags in trace names: a run's name is user text."""
    return text.replace("<", "\u2039").replace(">", "\u203a")


def compare_figure(runs: list[Run], series: dict[int, list[list[float]]], *, key: str) -> dict[str, Any]:
    """Plotly figure JSON: one trace per run on shared axes."""
    traces = [
        {
            "type": "scatter",
            "mode": "lines+markers" if len(series[run.pk]) < 30 else "lines",
            "name": plain_label(f"#{run.pk} {run.name}"),
            "x": [point[0] for point in series[run.pk]],
            "y": [point[1] for point in series[run.pk]],
        }
        for run in runs
    ]
    return {
        "data": traces,
        "layout": {
            "xaxis": {"title": {"text": "step"}},
            "yaxis": {"title": {"text": key}},
            "margin": {"l": 50, "r": 10, "t": 10, "b": 40},
            "legend": {"orientation": "h"},
            "height": 380,
        },
    }
