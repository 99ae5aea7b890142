"""Plotly figures of a run's metrics, as pure functions of `run_metric_series` output.

Each chart says which metric keys it plots: `always` keys get a trace even before data
arrives, and keys that fully match one of `patterns` get one when first seen. The live
page (webapp/static/js/run_live.js) reads the same `match` rules and trace style from this
output, so the assignment of keys to charts lives here only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

Series = dict[str, list[list[float]]]


@dataclass(frozen=True)
class ChartSpec:
    id: str
    title: str
    y_title: str
    always: tuple[str, ...]
    # Regular expressions matched against the whole key; kept to the syntax that Python's
    # `re` and JavaScript's RegExp read alike.
    patterns: tuple[str, ...] = ()

    def matches(self, key: str) -> bool:
        return key in self.always or any(re.fullmatch(p, key) for p in self.patterns)

    def keys(self, series: Series) -> list[str]:
        extra = sorted(k for k in series if k not in self.always and self.matches(k))
        return [*self.always, *extra]


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("reward", "Reward", "reward", ("reward",), (r"rewards/[^/]+/mean",)),
    ChartSpec("tool-calls", "Tool-call frequency", "calls", ("tools/call_frequency",)),
    ChartSpec("tool-failures", "Tool-failure rate", "failure rate", ("tools/failure_frequency",)),
    ChartSpec("loss", "Loss, KL and entropy", "value", ("loss",), ("kl", "entropy")),
    ChartSpec(
        "time", "Where the time goes", "seconds per step", ("perf/step_s", "perf/generation_s", "perf/tool_s"),
    ),
    ChartSpec(
        "completion-length",
        "Completion length",
        "tokens",
        ("completions/mean_length",),
        (r"completions/(min|max)_length", r"completions/(mean|min|max)_terminated_length"),
    ),
)

# Only on the page of a run with an SFT warm-up (worker/training/warmup.py); x is the SFT step.
WARMUP_CHART = ChartSpec("sft-loss", "SFT warm-up loss", "loss", ("sft/loss",))
# Only on the page of a GPU run (worker/training/perf.py measures both; the async trainer's spelling of
# the throughput is stored under the same key, webapp.runs.telemetry.metric_keys).
GPU_CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("throughput", "Generation throughput", "generated tokens/s", ("perf/generated_tokens_per_s",)),
    ChartSpec("gpu-memory", "GPU memory (peak per step)", "GiB", ("perf/gpu_memory_gib",)),
)

TRACE_STYLE: dict[str, Any] = {"type": "scatter", "mode": "lines+markers", "marker": {"size": 4}}


def chart_trace(key: str, points: list[list[float]]) -> dict[str, Any]:
    return {
        **TRACE_STYLE,
        "marker": dict(TRACE_STYLE["marker"]),
        "name": key,
        "x": [point[0] for point in points],
        "y": [point[1] for point in points],
    }


def chart_layout(spec: ChartSpec) -> dict[str, Any]:
    return {
        "title": {"text": spec.title},
        "height": 320,
        "margin": {"l": 56, "r": 16, "t": 40, "b": 80},
        "xaxis": {"title": {"text": "step"}, "rangemode": "tozero"},
        "yaxis": {"title": {"text": spec.y_title}},
        "legend": {"orientation": "h", "x": 0, "y": -0.25, "yanchor": "top"},
        "showlegend": True,
        # Keeps the reader's zoom when the page replaces the data with Plotly.react.
        "uirevision": spec.id,
    }


def run_chart(spec: ChartSpec, series: Series) -> dict[str, Any]:
    keys = spec.keys(series)
    return {
        "id": spec.id,
        "title": spec.title,
        "keys": keys,
        "match": {"always": list(spec.always), "patterns": list(spec.patterns)},
        "figure": {
            "data": [chart_trace(key, series.get(key, [])) for key in keys],
            "layout": chart_layout(spec),
        },
    }


def run_charts(series: Series, *, warmup: bool = False, gpu: bool = False) -> list[dict[str, Any]]:
    """One figure per chart, in page order; series maps metric key -> [[step, value], ...].
    `warmup`: the run has an SFT warm-up, whose loss gets a chart of its own, first.
    `gpu`: the run trains on CUDA: generation throughput and GPU memory follow."""
    specs = ((WARMUP_CHART,) if warmup else ()) + CHARTS + (GPU_CHARTS if gpu else ())
    return [run_chart(spec, series) for spec in specs]


def metric_chart(key: str, points: list[list[float]]) -> dict[str, Any]:
    """A chart of one metric key that a user added from the page's metric picker; shaped
    like `run_chart` output so the page treats both alike."""
    return {
        "id": f"metric:{key}",
        "title": key,
        "keys": [key],
        "match": {"always": [key], "patterns": []},
        "figure": {
            "data": [chart_trace(key, points)],
            "layout": {
                **chart_layout(ChartSpec(f"metric:{key}", key, key, (key,))),
                "showlegend": False,
            },
        },
    }


def run_chart_page(
    series: Series, *, logged_keys: list[str], wall_time_key: str, added: list[str]
) -> dict[str, Any]:
    """What the page's metric picker and added charts start from: the keys to offer (the
    lab's own, starting with "_", left out), step -> wall time, and the added charts."""
    return {
        "keys": [key for key in logged_keys if not key.startswith("_")],
        "wall_time": series.get(wall_time_key, []),
        "metric_charts": [metric_chart(key, series.get(key, [])) for key in added],
    }
