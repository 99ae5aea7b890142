"""A sweep's members from its grid, and its figure: pure functions of JSON."""

from __future__ import annotations

import pytest

from webapp.sweeps.figures import sweep_parallel_coordinates
from webapp.sweeps.grid import (
    PathError,
    config_paths,
    config_set,
    differing_paths,
    grid_errors,
    grid_members,
)


def test_config_set_reaches_nested_objects_list_items_and_makes_missing_objects():
    config = {"environments": [{"rows": 8}], "rewards": [{"weight": 1.0}, {"weight": 0.1}]}
    config_set(config, "environments.0.rows", 16)
    config_set(config, "rewards.1.weight", 0.5)
    config_set(config, "grpo.seed", 2)
    assert config == {"environments": [{"rows": 16}], "rewards": [{"weight": 1.0}, {"weight": 0.5}], "grpo": {"seed": 2}}


@pytest.mark.parametrize(("path", "message"), [
    ("environments.3.rows", "environments has 1 item(s): there is no item 3"),
    ("environments.rows", "environments is a list: give an item's index, not 'rows'"),
    ("environments.0.rows.x", "environments.0.rows is a single value (8): nothing is inside it"),
    ("grpo.0", "grpo is an object: '0' is not one of its keys"),
])
def test_config_set_refuses_a_path_that_does_not_reach_into_the_config(path, message):
    config = {"environments": [{"rows": 8}], "grpo": {}}
    with pytest.raises(PathError) as caught:
        config_set(config, path, 1)
    assert str(caught.value) == message
    assert config == {"environments": [{"rows": 8}], "grpo": {}}


def test_a_grid_is_every_combination_the_first_path_slowest():
    grid = {"grpo.learning_rate": [1e-5, 1e-4], "grpo.seed": [0, 1, 2]}
    assert grid_members(grid, method="grid", count=None, seed=None) == [
        {"grpo.learning_rate": 1e-5, "grpo.seed": 0}, {"grpo.learning_rate": 1e-5, "grpo.seed": 1},
        {"grpo.learning_rate": 1e-5, "grpo.seed": 2}, {"grpo.learning_rate": 1e-4, "grpo.seed": 0},
        {"grpo.learning_rate": 1e-4, "grpo.seed": 1}, {"grpo.learning_rate": 1e-4, "grpo.seed": 2},
    ]


def test_a_random_draw_is_distinct_combinations_and_the_same_for_the_same_seed():
    grid = {"a": list(range(10)), "b": list(range(10)), "c": ["x", "y"]}
    first = grid_members(grid, method="random", count=12, seed=7)
    assert first == grid_members(grid, method="random", count=12, seed=7)
    assert first != grid_members(grid, method="random", count=12, seed=8)
    assert len(first) == 12
    assert len({(m["a"], m["b"], m["c"]) for m in first}) == 12
    assert all(list(m) == ["a", "b", "c"] and m["c"] in ("x", "y") for m in first)
    # Every combination is reachable: drawing all of them gives the whole grid.
    every = grid_members({"a": [1, 2], "b": [3, 4, 5]}, method="random", count=6, seed=0)
    assert sorted((m["a"], m["b"]) for m in every) == [(1, 3), (1, 4), (1, 5), (2, 3), (2, 4), (2, 5)]


def test_grid_errors_name_each_path_to_fix():
    assert grid_errors({"grpo.seed": [], "name": [1], "a..b": [1]}) == {
        "grid.grpo.seed": ["a non-empty list of the values this field takes"],
        "grid.name": ["each member is named by the sweep; the name cannot be swept"],
        "grid": ["'a..b' is not a dotted path: keys and list indices joined by '.', e.g. grpo.learning_rate or rewards.1.weight"],
    }
    assert grid_errors([1]) == {"grid": ['an object of dotted config paths and their values, e.g. {"grpo.seed": [0, 1, 2]}']}
    assert grid_errors({"grpo.seed": [0, 1]}) == {}


def test_differing_paths_are_the_leaves_not_equal_everywhere_without_the_name():
    configs = [
        {"name": "a", "grpo": {"seed": 0, "lr": 1}, "environments": [{"rows": 8}], "tags": []},
        {"name": "b", "grpo": {"seed": 1, "lr": 1}, "environments": [{"rows": 8}], "tags": []},
        {"name": "c", "grpo": {"seed": 0, "lr": 1}, "environments": [{"rows": 9}], "tags": [], "extra": 1},
    ]
    assert differing_paths(configs) == ["grpo.seed", "environments.0.rows", "extra"]
    assert config_paths(configs[2]) == {
        "name": "c", "grpo.seed": 0, "grpo.lr": 1, "environments.0.rows": 9, "tags": [], "extra": 1,
    }


def _table(rows):
    return {"metric": "reward", "paths": ["grpo.learning_rate", "grpo.loss_type"], "members": rows}


def _row(run, lr, loss, last):
    summary = None if last is None else {"last": last, "max": last + 1, "min": last - 1, "step": 2}
    return {"run": run, "params": {"grpo.learning_rate": lr, "grpo.loss_type": loss}, "summary": summary}


def test_parallel_coordinates_has_an_axis_per_parameter_and_one_for_the_metric():
    table = _table([_row(1, 1e-6, "grpo", 0.5), _row(2, 1e-4, "dapo", 0.25), _row(3, 1e-3, "grpo", None)])
    figure = sweep_parallel_coordinates(table=table, stat="max")
    (trace,) = figure["data"]
    assert trace["type"] == "parcoords"
    assert trace["customdata"] == [1, 2]  # run 3 has logged no reward yet
    assert trace["line"]["color"] == [1.5, 1.25]
    lr, loss, score = trace["dimensions"]
    # Over two decades apart: a log10 axis.
    assert lr["label"] == "log10 grpo.learning_rate"
    assert [round(v, 9) for v in lr["values"]] == [-6.0, -4.0]
    assert loss == {"label": "grpo.loss_type", "values": [1, 0], "tickvals": [0, 1], "ticktext": ["dapo", "grpo"]}
    assert score == {"label": "reward (max)", "values": [1.5, 1.25]}


def test_parallel_coordinates_without_a_summary_says_so():
    figure = sweep_parallel_coordinates(table=_table([_row(1, 1e-5, "grpo", None)]))
    assert figure == {"data": [], "layout": {"title": {"text": "No member has logged reward yet"}, "height": 360}}
