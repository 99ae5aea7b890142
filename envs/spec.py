"""What one environment the lab bundles *is*: the spec its folder declares in `lab.py`.

Every table that says something about a bundled environment (its server process, its
training adapter, its solver, the attributes its episodes report and their ranges, its
default prompt, its evaluation columns, its replay renderer) reads it from one
`BundledSpec`, collected by envs.registry. A `lab.py` imports only this module: nothing
here imports Django, openenv, torch or the worker, and adapters and solvers are named by
dotted path, so the web process can read every spec without loading their code.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

HOST = "127.0.0.1"  # where the bundled servers listen

# (name, what it means): an attribute of a finished episode (envs/adapters/attributes.py).
Attribute = tuple[str, str]
# (low, high): the values an attribute can take, for learnability's ceiling and floor.
Range = tuple[float, float]
COUNT: Range = (0.0, float("inf"))

# What every adapter reports (envs/adapters/base.py, ors.py, generic.py).
COMMON_ATTRIBUTES: tuple[Attribute, ...] = (
    (
        "reward",
        "the episode reward: the sum of the step rewards (negative included) on OpenEnv servers "
        "written elsewhere, the last one for catch, sudoku, wordle and ORS, the best for echo",
    ),
    ("reward_last", "the last non-null reward of the episode"),
    ("reward_sum", "the sum of the episode's step rewards"),
    ("reward_max", "the largest step reward of the episode"),
    ("reward_count", "how many steps reported a reward"),
    ("steps", "tool calls that reached the environment"),
    ("tool_calls", "tool calls the model made"),
    ("tool_failures", "tool calls that failed"),
    ("tool_successes", "tool calls that succeeded"),
    ("lost", "1 if the episode was lost (the rollout is unscored)"),
    ("calls_<tool>", "calls of one tool (e.g. calls_guess)"),
    ("failures_<tool>", "failed calls of one tool"),
)


@dataclass(frozen=True)
class AdapterSpec:
    key: str
    adapter_path: str
    tool_names: tuple[str, ...]
    # The `/schema` action the adapter speaks: its title and its fields (less `metadata`).
    action_title: str
    action_fields: tuple[str, ...]


# Episode records of one model (`reward`, `won`, `tool_calls`, ...) and their attributes, in
# the same order -> one cell of the evaluation table (webapp.evaluations.selectors).
ColumnValue = Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, float]]], Any]


@dataclass(frozen=True)
class Column:
    """An evaluation column an environment adds after the common ones."""

    name: str
    description: str
    value: ColumnValue


@dataclass(frozen=True)
class BundledSpec:
    """One bundled environment: its server process (started by webapp.catalog.bundled), its
    adapter, and what the lab's tables say about it. The first eight fields are the server's;
    the rest default to "nothing to say" (no solver, common attributes only, no default
    prompt, no extra columns, the plain transcript renderer)."""

    key: str
    title: str
    kind: str  # Environment.Kind: "openenv" or "ors"
    # The argument that names the server in its command line (checked in /proc/<pid>/cmdline).
    marker: str
    default_capacity: int
    # Where `envlab_setup` puts it when the port is free, so URLs are stable across restarts.
    default_port: int
    command: Callable[[int], list[str]]
    # The adapter written for it; None where the worker generates one from what the server
    # describes (mcpdemo) or trains through the ORS adapter.
    adapter: AdapterSpec | None = None
    # The solver class (envs/solvers.py), by dotted path; None: no solver, no warm-up from one.
    solver: str | None = None
    # Every attribute its episodes report, in the order the composer offers them.
    attributes: tuple[Attribute, ...] = COMMON_ATTRIBUTES
    # Ranges of its own attributes; an attribute not listed is unbounded. A mapping is not
    # hashable, so it takes no part in the spec's hash.
    ranges: Mapping[str, Range] = field(default_factory=dict, hash=False)
    # The prompt of an evaluation or dry run that gives none; None: the request must give one.
    prompt: str | None = None
    columns: tuple[Column, ...] = ()
    # webapp/static/js/replay/<renderer>.js draws its board; None: the plain transcript.
    renderer: str | None = None


def uvicorn_command(app: str) -> Callable[[int], list[str]]:
    def build(port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "uvicorn",
            app,
            "--host",
            HOST,
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]

    return build


def openenv_server(key: str, title: str, port: int, *, module: str | None = None,
                   capacity: int = 64) -> dict[str, Any]:
    """The server fields of an OpenEnv environment served by uvicorn from `<module>:app`
    (`envs.<key>.server` by default), for `BundledSpec(**openenv_server(...), ...)`."""
    app = f"{module or f'envs.{key}.server'}:app"
    return {
        "key": key, "title": title, "kind": "openenv", "marker": app,
        "default_capacity": capacity, "default_port": port, "command": uvicorn_command(app),
    }  # fmt: skip


def mean(values: Sequence[float]) -> float | None:
    """The mean of an evaluation column's values; None for no values (no episode played)."""
    return sum(values) / len(values) if values else None


def attribute_sum(attributes: Sequence[Mapping[str, float]], name: str) -> int:
    """An attribute summed over a model's episodes, as a whole count."""
    return int(sum(float(a.get(name, 0.0)) for a in attributes))


def summed(name: str) -> ColumnValue:
    """The value of a column that sums the attribute `name` over a model's episodes."""

    def value(played: Sequence[Mapping[str, Any]], attributes: Sequence[Mapping[str, float]]) -> int:
        return attribute_sum(attributes, name)

    return value
