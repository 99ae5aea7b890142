"""Runs in groups: which group a run falls in (`group`, `tag` or a config path) and, per group,
one metric's mean with a band, step by step over the runs that logged that step.

Pure functions over selector output (`run_metric_series`'s `[step, value]` lists), used by
`GET /api/runs/compare/?group_by=...` and the compare page; the figure is Plotly JSON.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

GROUP_BY_FIELDS = ("group", "tag")
CONFIG_PREFIX = "config."
# A dotted path of config keys (or list indices): `grpo.learning_rate`, `environments.0.weight`.
_DOTTED = re.compile(r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$")
BANDS = ("minmax", "std")
NO_VALUE = "(none)"
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)


class GroupByError(ValueError):
    pass


def group_by_parse(value: str) -> tuple[str, list[str]]:
    """`("group", [])`, `("tag", [])` or `("config", ["grpo", "learning_rate"])`; raises
    GroupByError saying what is accepted."""
    if value in GROUP_BY_FIELDS:
        return value, []
    if value.startswith(CONFIG_PREFIX) and _DOTTED.match(value[len(CONFIG_PREFIX):]):
        return "config", value[len(CONFIG_PREFIX):].split(".")
    raise GroupByError(
        f"'{value[:120]}' is not a grouping: use group, tag or config.<dotted path> (e.g. config.grpo.learning_rate)"
    )


_MISSING = object()


def _config_at(config: Any, path: Sequence[str]) -> Any:
    node = config
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def run_group_labels(run: Any, *, field: str, path: Sequence[str]) -> list[str]:
    """The groups a run falls in: its `group`, each of its tags (a run with two tags is in
    both groups), or its config's value at `path`; NO_VALUE where it has none. Read with
    getattr so that rows without the field (a caller's stand-in) group as NO_VALUE."""
    if field == "group":
        return [getattr(run, "group", "") or NO_VALUE]
    if field == "tag":
        tags = getattr(run, "tags", None)
        slugs = [tag.slug for tag in tags.all()] if tags is not None and hasattr(tags, "all") else []
        return slugs or [NO_VALUE]
    value = _config_at(getattr(run, "config", None), path)
    return [NO_VALUE if value is _MISSING else _label(value)]


def runs_grouped(runs: Iterable[Any], *, field: str, path: Sequence[str]) -> dict[str, list[int]]:
    """Group label -> the ids of its runs, groups in order of first appearance, NO_VALUE last.
    Raises GroupByError when a config path reaches no run's config (a typo, not a grouping)."""
    groups: dict[str, list[int]] = {}
    for run in runs:
        for label in run_group_labels(run, field=field, path=path):
            groups.setdefault(label, []).append(run.pk)
    if field == "config" and list(groups) == [NO_VALUE]:
        raise GroupByError(f"no chosen run's config has '{'.'.join(path)[:120]}'")
    if NO_VALUE in groups:
        groups[NO_VALUE] = groups.pop(NO_VALUE)
    return groups


def group_stats(
    series: Mapping[int, Sequence[Sequence[float]]], groups: Mapping[str, Sequence[int]]
) -> list[dict[str, Any]]:
    """Per group, at each step any of its runs logged: how many runs logged it and their
    mean, min, max and (population, numpy's ddof=0) standard deviation. A run that did not
    log a step is left out of that step, not counted as zero; non-finite values likewise."""
    out = []
    for label, members in groups.items():
        by_step: dict[int, list[float]] = {}
        for run_id in members:
            for point in series.get(run_id, ()):
                value = point[1]
                if value is None or not math.isfinite(value):
                    continue
                by_step.setdefault(int(point[0]), []).append(float(value))
        steps = sorted(by_step)
        means, lows, highs, stds, counts = [], [], [], [], []
        for step in steps:
            values = by_step[step]
            mean = math.fsum(values) / len(values)
            means.append(mean)
            lows.append(min(values))
            highs.append(max(values))
            stds.append(math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)))
            counts.append(len(values))
        out.append({
            "group": label, "runs": list(members), "steps": steps, "count": counts,
            "mean": means, "min": lows, "max": highs, "std": stds,
        })
    return out


def _fill(color: str) -> str:
    red, green, blue = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},0.2)"


def plain_label(text: str) -> str:
    """Plotly reads <b>, <a href> and similar tags in trace names: group labels and run names
    are user text."""
    return text.replace("<", "\u2039").replace(">", "\u203a")


def step_figure(data: list[dict[str, Any]], *, key: str, top: int) -> dict[str, Any]:
    """Plotly figure JSON of `data` over the steps, `key` on the y axis; `top`: the margin
    above the plot (px), where the legend goes."""
    return {
        "data": data,
        "layout": {
            "xaxis": {"title": {"text": "step"}},
            "yaxis": {"title": {"text": key}},
            "margin": {"l": 50, "r": 10, "t": top, "b": 40},
            "legend": {"orientation": "h"},
            "height": 380,
        },
    }


def group_figure(stats: Sequence[Mapping[str, Any]], *, key: str, band: str) -> dict[str, Any]:
    """Plotly figure JSON: per group a band (min-max, or mean ± std) under its mean line.

    Each group's traces are [lower edge, upper edge filled down to it, mean], tagged in
    `meta` with the group and their role, so the page can smooth them and tests can count them.
    """
    if band not in BANDS:
        raise GroupByError(f"band is one of {', '.join(BANDS)}, not '{band[:40]}'")
    data: list[dict[str, Any]] = []
    for index, group in enumerate(stats):
        color = PALETTE[index % len(PALETTE)]
        name = plain_label(f"{group['group']} ({len(group['runs'])} runs)")
        if band == "minmax":
            lower, upper = list(group["min"]), list(group["max"])
        else:
            lower = [m - s for m, s in zip(group["mean"], group["std"], strict=True)]
            upper = [m + s for m, s in zip(group["mean"], group["std"], strict=True)]
        common = {"type": "scatter", "x": list(group["steps"]), "legendgroup": f"g{index}"}
        data.append({
            **common, "mode": "lines", "y": lower, "name": name, "showlegend": False, "hoverinfo": "skip",
            "line": {"width": 0, "color": color}, "meta": {"group": group["group"], "role": "band-lower"},
        })
        data.append({
            **common, "mode": "lines", "y": upper, "name": name, "showlegend": False, "hoverinfo": "skip",
            "fill": "tonexty", "fillcolor": _fill(color), "line": {"width": 0, "color": color},
            "meta": {"group": group["group"], "role": "band-upper"},
        })
        data.append({
            **common, "mode": "lines+markers" if len(group["steps"]) < 30 else "lines", "y": list(group["mean"]),
            "name": name, "line": {"width": 2, "color": color}, "marker": {"color": color},
            "meta": {"group": group["group"], "role": "mean"},
        })
    return step_figure(data, key=key, top=30)
