"""webapp.runs.telemetry.charts: pure functions from metric series to Plotly figure JSON."""

from __future__ import annotations

import json

from webapp.runs.telemetry.charts import run_charts

STYLE = {"type": "scatter", "mode": "lines+markers", "marker": {"size": 4}}


def layout(chart_id: str, title: str, y_title: str) -> dict:
    return {
        "title": {"text": title},
        "height": 320,
        "margin": {"l": 56, "r": 16, "t": 40, "b": 80},
        "xaxis": {"title": {"text": "step"}, "rangemode": "tozero"},
        "yaxis": {"title": {"text": y_title}},
        "legend": {"orientation": "h", "x": 0, "y": -0.25, "yanchor": "top"},
        "showlegend": True,
        "uirevision": chart_id,
    }


def trace(name: str, x: list, y: list) -> dict:
    return {**STYLE, "name": name, "x": x, "y": y}


def empty_chart(chart_id: str, title: str, y_title: str, always: list[str], patterns: list[str]) -> dict:
    """A chart of a run with no series yet: its always-shown keys, each an empty trace."""
    return {
        "id": chart_id,
        "title": title,
        "keys": always,
        "match": {"always": always, "patterns": patterns},
        "figure": {
            "data": [trace(key, [], []) for key in always],
            "layout": layout(chart_id, title, y_title),
        },
    }


def test_empty_series_gives_every_chart_with_its_always_traces_empty() -> None:
    charts = run_charts({})

    assert charts == [
        empty_chart("reward", "Reward", "reward", ["reward"], [r"rewards/[^/]+/mean"]),
        empty_chart("tool-calls", "Tool-call frequency", "calls", ["tools/call_frequency"], []),
        empty_chart("tool-failures", "Tool-failure rate", "failure rate", ["tools/failure_frequency"], []),
        empty_chart("loss", "Loss, KL and entropy", "value", ["loss"], ["kl", "entropy"]),
        empty_chart(
            "time",
            "Where the time goes",
            "seconds per step",
            ["perf/step_s", "perf/generation_s", "perf/tool_s"],
            [],
        ),
        empty_chart(
            "completion-length",
            "Completion length",
            "tokens",
            ["completions/mean_length"],
            [r"completions/(min|max)_length", r"completions/(mean|min|max)_terminated_length"],
        ),
    ]


def test_keys_are_assigned_to_charts_always_first_then_sorted_and_unknown_keys_dropped() -> None:
    series = {
        "rewards/tool_called/mean": [[1, 0.0], [2, 1.0]],
        "reward": [[1, 0.25], [2, 0.75]],
        "rewards/env_reward/mean": [[1, 0.5], [2, 1.0]],
        "rewards/env_reward/std": [[1, 0.1]],
        "tools/call_frequency": [[1, 1.5]],
        "tools/failure_frequency": [[1, 0.0], [2, 0.5]],
        "kl": [[2, 0.01]],
        "entropy": [[1, 2.5]],
        "completions/max_length": [[1, 40]],
        "completions/mean_length": [[1, 20.5]],
        "completions/clipped_ratio": [[1, 0.0]],
        "learning_rate": [[1, 5e-05]],
    }

    charts = {chart["id"]: chart for chart in run_charts(series)}

    assert {cid: chart["keys"] for cid, chart in charts.items()} == {
        "reward": ["reward", "rewards/env_reward/mean", "rewards/tool_called/mean"],
        "tool-calls": ["tools/call_frequency"],
        "tool-failures": ["tools/failure_frequency"],
        "loss": ["loss", "entropy", "kl"],
        "time": ["perf/step_s", "perf/generation_s", "perf/tool_s"],
        "completion-length": ["completions/mean_length", "completions/max_length"],
    }
    assert charts["reward"]["figure"]["data"] == [
        trace("reward", [1, 2], [0.25, 0.75]),
        trace("rewards/env_reward/mean", [1, 2], [0.5, 1.0]),
        trace("rewards/tool_called/mean", [1, 2], [0.0, 1.0]),
    ]
    assert charts["loss"]["figure"]["data"] == [
        trace("loss", [], []),
        trace("entropy", [1], [2.5]),
        trace("kl", [2], [0.01]),
    ]
    assert charts["completion-length"]["figure"]["data"] == [
        trace("completions/mean_length", [1], [20.5]),
        trace("completions/max_length", [1], [40]),
    ]
    assert charts["tool-failures"]["figure"]["data"] == [
        trace("tools/failure_frequency", [1, 2], [0.0, 0.5])
    ]


def test_output_is_plain_json_and_input_is_not_modified() -> None:
    series = {"reward": [[1, 0.5]], "kl": [[1, 0.1]]}
    before = json.dumps(series)

    charts = run_charts(series)

    assert json.loads(json.dumps(charts)) == charts
    assert json.dumps(series) == before
    charts[0]["figure"]["data"][0]["marker"]["size"] = 99
    assert run_charts(series)[0]["figure"]["data"][0]["marker"] == {"size": 4}


def test_a_pattern_does_not_match_part_of_a_key() -> None:
    series = {"rewards/a/b/mean": [[1, 1.0]], "xkl": [[1, 1.0]], "kl_coef": [[1, 1.0]]}

    charts = {chart["id"]: chart["keys"] for chart in run_charts(series)}

    assert charts["reward"] == ["reward"]
    assert charts["loss"] == ["loss"]


def test_a_gpu_run_gets_throughput_and_gpu_memory_charts_after_the_others() -> None:
    series = {"perf/generated_tokens_per_s": [[1, 120.5], [2, 130.0]], "perf/gpu_memory_gib": [[1, 3.25]]}
    cpu = run_charts(series)
    gpu = run_charts(series, gpu=True)
    assert [c["id"] for c in gpu] == [c["id"] for c in cpu] + ["throughput", "gpu-memory"]
    throughput, memory = gpu[-2:]
    assert throughput["figure"]["data"] == [trace("perf/generated_tokens_per_s", [1, 2], [120.5, 130.0])]
    assert throughput["figure"]["layout"]["yaxis"]["title"]["text"] == "generated tokens/s"
    assert memory["figure"]["data"] == [trace("perf/gpu_memory_gib", [1], [3.25])]


def test_the_async_trainers_metric_names_are_stored_under_grpos() -> None:
    from webapp.runs.telemetry.metric_keys import canonical_metric_key

    assert canonical_metric_key("rewards/outcome") == "rewards/outcome/mean"  # async 1.16
    assert canonical_metric_key("rewards/outcome/mean") == "rewards/outcome/mean"  # GRPO, async 1.18
    assert canonical_metric_key("rewards/outcome/std") == "rewards/outcome/std"
    assert canonical_metric_key("rollout/generated_tok_s") == "perf/generated_tokens_per_s"
    for same in ("tools/echo/call_total", "sample/staleness_mean", "rollout/turns_mean", "reward", "rewards/"):
        assert canonical_metric_key(same) == same
