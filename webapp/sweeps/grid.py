"""A sweep's members from its grid, as pure functions of JSON: dotted paths into a run config
(`grpo.learning_rate`, `environments.0.rows`, `rewards.1.weight`), the grid's combinations
(all of them, or `count` drawn with a seed), and which paths differ between members' configs."""

from __future__ import annotations

import copy
import itertools
import json
import math
import random
import re
from typing import Any

# Members one sweep may have: each is a run, and each is checked (its environments probed) up front.
MAX_MEMBERS = 64
MAX_PATHS = 16
MAX_VALUES = 64
PATH_MAX_LENGTH = 200
PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+))*$")
# A member's config carries its own run name: not a parameter of the sweep.
NOT_PARAMETERS = frozenset({"name"})


class PathError(ValueError):
    """A dotted path that does not reach into the config; the message says where it stops."""


def config_set(config: dict[str, Any], path: str, value: Any) -> None:
    """Set `path` in `config` (in place). A missing object on the way is made (`grpo.seed` in a
    config without `grpo`); a list is indexed by a number and must hold that item already."""
    parts = path.split(".")
    node: Any = config
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[:depth]) or "the config"
        if isinstance(node, dict):
            if part.isdigit():
                raise PathError(f"{where} is an object: '{part}' is not one of its keys")
            if last:
                node[part] = copy.deepcopy(value)
                return
            if part not in node or node[part] is None:
                node[part] = {}
            node = node[part]
        elif isinstance(node, list):
            if not part.isdigit():
                raise PathError(f"{where} is a list: give an item's index, not '{part}'")
            index = int(part)
            if index >= len(node):
                raise PathError(f"{where} has {len(node)} item(s): there is no item {index}")
            if last:
                node[index] = copy.deepcopy(value)
                return
            node = node[index]
        else:
            raise PathError(f"{where} is a single value ({json.dumps(node)[:40]}): nothing is inside it")


def grid_errors(grid: Any) -> dict[str, list[str]]:
    """What is wrong with a grid's shape: {dotted path: [values]}, each list non-empty."""
    if not isinstance(grid, dict) or not grid:
        return {"grid": ['an object of dotted config paths and their values, e.g. {"grpo.seed": [0, 1, 2]}']}
    errors: dict[str, list[str]] = {}
    if len(grid) > MAX_PATHS:
        errors["grid"] = [f"at most {MAX_PATHS} paths (this grid has {len(grid)})"]
    for path, values in grid.items():
        if not isinstance(path, str) or len(path) > PATH_MAX_LENGTH or not PATH_RE.match(path):
            errors["grid"] = [
                f"{str(path)[:60]!r} is not a dotted path: keys and list indices joined by '.', "
                "e.g. grpo.learning_rate or rewards.1.weight"
            ]
        elif path in NOT_PARAMETERS:
            errors[f"grid.{path}"] = ["each member is named by the sweep; the name cannot be swept"]
        elif not isinstance(values, list) or not values:
            errors[f"grid.{path}"] = ["a non-empty list of the values this field takes"]
        elif len(values) > MAX_VALUES:
            errors[f"grid.{path}"] = [f"at most {MAX_VALUES} values (this list has {len(values)})"]
    return errors


def grid_size(grid: dict[str, list[Any]]) -> int:
    return math.prod(len(values) for values in grid.values())


def grid_members(grid: dict[str, list[Any]], *, method: str, count: int | None, seed: int | None) -> list[dict[str, Any]]:
    """Each member's values, {path: value} in the grid's order: every combination ("grid",
    the first path slowest), or `count` distinct combinations drawn with `seed` ("random")."""
    paths = list(grid)
    if method == "grid":
        return [dict(zip(paths, combo, strict=True)) for combo in itertools.product(*(grid[p] for p in paths))]
    assert count is not None
    assert seed is not None
    drawn = random.Random(seed).sample(range(grid_size(grid)), count)
    members = []
    for number in drawn:
        values: dict[str, Any] = {}
        for path in reversed(paths):  # the last path varies fastest, as in the grid's order
            number, pick = divmod(number, len(grid[path]))
            values[path] = grid[path][pick]
        members.append({path: values[path] for path in paths})
    return members


def config_paths(config: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a config by its dotted path (list items by index); an empty object or list
    is a leaf of its own."""
    if isinstance(config, dict) and config:
        out: dict[str, Any] = {}
        for key, value in config.items():
            out.update(config_paths(value, f"{prefix}{key}."))
        return out
    if isinstance(config, list) and config:
        out = {}
        for index, value in enumerate(config):
            out.update(config_paths(value, f"{prefix}{index}."))
        return out
    return {prefix.removesuffix("."): config}


_MISSING = object()


def differing_paths(configs: list[Any]) -> list[str]:
    """The paths whose value is not the same in every config (absent counts as a value), in
    the order they first appear in the configs' keys; the run's name is not a parameter."""
    flat = [config_paths(config) for config in configs]
    order: dict[str, None] = {}
    for paths in flat:
        order.update(dict.fromkeys(paths))
    differing = []
    for path in order:
        if path in NOT_PARAMETERS:
            continue
        seen = [json.dumps(paths.get(path, _MISSING), sort_keys=True, default=repr) for paths in flat]
        if len(set(seen)) > 1:
            differing.append(path)
    return differing
