"""Runs in groups (webapp/runs/telemetry/groups.py): per group, at each step, the mean, min,
max and std over the runs that logged that step, equal to numpy's; which group a run is in."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from webapp.runs.telemetry.groups import (
    NO_VALUE,
    GroupByError,
    group_by_parse,
    group_figure,
    group_stats,
    runs_grouped,
)

# 2 groups x 3 runs, ragged: runs stop early, skip steps, and log a NaN that must not count.
SERIES = {
    1: [[1, 0.1], [2, 0.4], [3, 0.9], [5, 1.0]],
    2: [[1, 0.3], [3, 0.5]],
    3: [[2, 0.2], [3, 0.7], [4, 0.6], [5, float("nan")]],
    4: [[1, 2.0], [2, 3.0], [10, 4.0]],
    5: [[1, -1.0], [10, 6.5]],
    6: [[2, 1.5], [4, 2.5], [10, 5.0]],
}
GROUPS = {"lr=1e-5": [1, 2, 3], "lr=3e-5": [4, 5, 6]}


def _numpy_reference(members):
    by_step: dict[int, list[float]] = {}
    for run_id in members:
        for step, value in SERIES[run_id]:
            if np.isfinite(value):
                by_step.setdefault(step, []).append(value)
    steps = sorted(by_step)
    arrays = [np.array(by_step[step]) for step in steps]
    return steps, arrays


def test_group_stats_equal_numpy_at_every_step():
    stats = group_stats(SERIES, GROUPS)

    assert [group["group"] for group in stats] == ["lr=1e-5", "lr=3e-5"]
    assert [group["runs"] for group in stats] == [[1, 2, 3], [4, 5, 6]]
    for group in stats:
        steps, arrays = _numpy_reference(GROUPS[group["group"]])
        assert group["steps"] == steps
        assert group["count"] == [len(a) for a in arrays]
        assert group["mean"] == pytest.approx([float(np.mean(a)) for a in arrays], abs=1e-12)
        assert group["min"] == pytest.approx([float(np.min(a)) for a in arrays], abs=1e-12)
        assert group["max"] == pytest.approx([float(np.max(a)) for a in arrays], abs=1e-12)
        assert group["std"] == pytest.approx([float(np.std(a)) for a in arrays], abs=1e-12)
    # Spelled out for one group: step 5 is run 1's alone (run 3's NaN is left out), step 4 run 3's.
    first = stats[0]
    assert first["steps"] == [1, 2, 3, 4, 5]
    assert first["count"] == [2, 2, 3, 1, 1]
    assert first["mean"] == pytest.approx([0.2, 0.3, 0.7, 0.6, 1.0])
    assert first["min"] == pytest.approx([0.1, 0.2, 0.5, 0.6, 1.0])
    assert first["max"] == pytest.approx([0.3, 0.4, 0.9, 0.6, 1.0])


def test_the_figure_has_one_band_and_one_mean_per_group():
    stats = group_stats(SERIES, GROUPS)

    minmax = group_figure(stats, key="reward", band="minmax")
    std = group_figure(stats, key="reward", band="std")

    assert [(t["meta"]["group"], t["meta"]["role"]) for t in minmax["data"]] == [
        ("lr=1e-5", "band-lower"), ("lr=1e-5", "band-upper"), ("lr=1e-5", "mean"),
        ("lr=3e-5", "band-lower"), ("lr=3e-5", "band-upper"), ("lr=3e-5", "mean"),
    ]
    assert [t.get("fill") for t in minmax["data"]] == [None, "tonexty", None] * 2
    assert minmax["data"][0]["y"] == stats[0]["min"] and minmax["data"][1]["y"] == stats[0]["max"]
    assert minmax["data"][2]["y"] == stats[0]["mean"] and minmax["data"][2]["x"] == [1, 2, 3, 4, 5]
    assert std["data"][3]["y"] == pytest.approx([m - s for m, s in zip(stats[1]["mean"], stats[1]["std"], strict=True)])
    assert std["data"][4]["y"] == pytest.approx([m + s for m, s in zip(stats[1]["mean"], stats[1]["std"], strict=True)])
    assert minmax["data"][2]["name"] == "lr=1e-5 (3 runs)"
    assert minmax["layout"]["yaxis"]["title"]["text"] == "reward"
    with pytest.raises(GroupByError, match="band is one of minmax, std, not 'iqr'"):
        group_figure(stats, key="reward", band="iqr")


def _run(pk, *, config=None, group="", tags=()):
    tag_rows = [SimpleNamespace(slug=slug) for slug in tags]
    return SimpleNamespace(pk=pk, config=config or {}, group=group, tags=SimpleNamespace(all=lambda: tag_rows))


def test_runs_fall_in_groups_by_config_path_group_or_tag():
    runs = [
        _run(1, config={"grpo": {"learning_rate": 1e-5, "seed": 0}}, group="a", tags=("x", "y")),
        _run(2, config={"grpo": {"learning_rate": 3e-5, "seed": 0}}, group="", tags=()),
        _run(3, config={"grpo": {"learning_rate": 1e-5}, "environments": [{"environment": 7}]}, group="a", tags=("y",)),
    ]

    assert runs_grouped(runs, field="config", path=["grpo", "learning_rate"]) == {"1e-05": [1, 3], "3e-05": [2]}
    assert runs_grouped(runs, field="config", path=["grpo", "seed"]) == {"0": [1, 2], NO_VALUE: [3]}
    assert runs_grouped(runs, field="config", path=["environments", "0", "environment"]) == {"7": [3], NO_VALUE: [1, 2]}
    assert runs_grouped(runs, field="group", path=[]) == {"a": [1, 3], NO_VALUE: [2]}
    assert runs_grouped(runs, field="tag", path=[]) == {"x": [1], "y": [1, 3], NO_VALUE: [2]}
    with pytest.raises(GroupByError, match=re.escape("no chosen run's config has 'grpo.lr'")):
        runs_grouped(runs, field="config", path=["grpo", "lr"])


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("group", ("group", [])), ("tag", ("tag", [])), ("config.grpo.seed", ("config", ["grpo", "seed"]))],
)
def test_group_by_parses(value, parsed):
    assert group_by_parse(value) == parsed


@pytest.mark.parametrize("value", ["config.", "config..x", "config.grpo.", "grpo.seed", "tags", "config.a b"])
def test_group_by_rejects_what_is_not_a_grouping(value):
    with pytest.raises(GroupByError, match=re.escape("is not a grouping: use group, tag or config.<dotted path>")):
        group_by_parse(value)
