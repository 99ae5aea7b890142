"""Comparing runs: metrics of 2-6 runs (up to 24 in groups) on shared axes, and what differs
between their configs.

Pure reads (selector output) and a pure figure function, used by the compare page and
`GET /api/runs/compare/`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from webapp.runs.config import stored_config_current
from webapp.runs.models import Run
from webapp.runs.telemetry.groups import (
    BANDS,
    GroupByError,
    group_by_parse,
    plain_label,
    runs_grouped,
    step_figure,
)
from webapp.runs.telemetry.metric_keys import WALL_TIME_KEY
from webapp.runs.telemetry.series import run_metric_keys, run_metric_series

MIN_RUNS, MAX_RUNS = 2, 6
# Grouped, each group is one mean line with a band, so more runs stay readable: 4 settings x 6 seeds.
MAX_RUNS_GROUPED = 24
MAX_KEYS = 8
COMPARE_POINTS = 500
MISSING = "—"


class CompareError(ValueError):
    """What is wrong with a comparison asked for, and which parameter (`field`) to fix."""

    def __init__(self, message: str, *, field: str = "run") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Comparison:
    """A validated comparison: its runs, metrics and, when grouped, the runs of each group."""

    runs: list[Run]
    keys: list[str]  # every key any run logged
    shown: list[str]  # the metrics asked for, one chart each
    group_by: str
    band: str
    groups: dict[str, list[int]] = field(default_factory=dict)
    unknown_keys: list[str] = field(default_factory=list)


def comparison_parse(
    *, visible: QuerySet[Run], params: Any, default_key: str = "reward", lenient_keys: bool = False
) -> Comparison:
    """Validate `run`, `key` (repeated), `group_by` and `band` query parameters. Raises
    CompareError naming the parameter to fix. With `lenient_keys` (the page), metrics none of
    the runs logged are dropped into `unknown_keys` instead, and with none left the default
    (or, when no run logged it, the first key logged) is shown."""
    group_by = params.get("group_by") or ""
    grouping: tuple[str, list[str]] | None = None
    if group_by:
        try:
            grouping = group_by_parse(group_by)
        except GroupByError as exc:
            raise CompareError(str(exc), field="group_by") from None
    band = params.get("band") or BANDS[0]
    if band not in BANDS:
        raise CompareError(f"band is one of {', '.join(BANDS)}, not '{band[:40]}'", field="band")
    runs = compare_runs(
        visible=visible, ids=params.getlist("run"), max_runs=MAX_RUNS_GROUPED if grouping else MAX_RUNS
    )
    keys = compare_keys(runs)
    asked = [value for value in params.getlist("key") if value]
    unknown = [key for key in dict.fromkeys(asked) if key not in keys] if lenient_keys else []
    if lenient_keys:
        asked = list(dict.fromkeys(key for key in asked if key in keys))[:MAX_KEYS]
        if not asked and default_key not in keys and keys:
            default_key = keys[0]
    try:
        shown = compare_key_list(asked, keys=keys, default=default_key)
    except CompareError as exc:
        if not lenient_keys:
            raise CompareError(str(exc), field="key") from None
        shown = [default_key]
    groups: dict[str, list[int]] = {}
    if grouping:
        try:
            groups = runs_grouped(runs, field=grouping[0], path=grouping[1])
        except GroupByError as exc:
            raise CompareError(str(exc), field="group_by") from None
    return Comparison(
        runs=runs, keys=keys, shown=shown, group_by=group_by, band=band, groups=groups, unknown_keys=unknown
    )


def compare_runs(*, visible: QuerySet[Run], ids: list[str], max_runs: int = MAX_RUNS) -> list[Run]:
    """The runs named by `ids`, in the order given, each visible to the caller. Raises
    CompareError naming what is wrong; an id the caller may not see reads as unknown."""
    try:
        wanted = list(dict.fromkeys(int(value) for value in ids))
    except ValueError:
        raise CompareError("run ids are whole numbers") from None
    if not MIN_RUNS <= len(wanted) <= max_runs:
        raise CompareError(f"pick {MIN_RUNS} to {max_runs} different runs to compare, not {len(wanted)}")
    found = {run.pk: run for run in visible.filter(pk__in=wanted).prefetch_related("tags")}
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


def compare_key_list(values: list[str], *, keys: list[str], default: str) -> list[str]:
    """The metrics asked for (each once, in order; `default` when none), each logged by one of
    the runs. Raises CompareError naming the first that none logged."""
    wanted = list(dict.fromkeys(value for value in values if value)) or [default]
    if len(wanted) > MAX_KEYS:
        raise CompareError(f"pick at most {MAX_KEYS} metrics, not {len(wanted)}")
    for key in wanted:
        if key not in keys:
            raise CompareError(f"none of these runs logged '{key[:120]}'")
    return wanted


def compare_series(runs: list[Run], *, key: str) -> dict[int, list[list[float]]]:
    return {
        run.pk: run_metric_series(run=run, keys=[key], max_points=COMPARE_POINTS).get(key, []) for run in runs
    }


def compare_wall_times(runs: list[Run]) -> dict[str, list[list[float]]]:
    """Each run's `[step, seconds since the epoch]` (the worker's wall-time metric)."""
    return {
        str(run.pk): run_metric_series(run=run, keys=[WALL_TIME_KEY], max_points=COMPARE_POINTS).get(
            WALL_TIME_KEY, []
        )
        for run in runs
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


def compare_figure(runs: list[Run], series: dict[int, list[list[float]]], *, key: str) -> dict[str, Any]:
    """Plotly figure JSON: one trace per run on shared axes."""
    traces = [
        {
            "type": "scatter",
            "mode": "lines+markers" if len(series[run.pk]) < 30 else "lines",
            "name": plain_label(f"#{run.pk} {run.name}"),
            "meta": {"run": run.pk},
            "x": [point[0] for point in series[run.pk]],
            "y": [point[1] for point in series[run.pk]],
        }
        for run in runs
    ]
    return step_figure(traces, key=key, top=10)
