"""Training rows for a run: one per episode, with the prompt and what `reset` needs.

Every row carries `env` (the environment's name within the run: the router sends the
episode there) and `seed` (so the same row replays the same episode in the arena).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

from webapp.runs.config import RunConfig, RunEnvironment
from worker.demo_model.conversations import random_phrase

_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")

# (item) -> rows of an environment that brings its own tasks (Open Reward Standard).
TaskRows = Callable[[RunEnvironment], list[dict[str, Any]]]


def prompt_rows(item: RunEnvironment, rng: random.Random) -> list[dict[str, Any]]:
    """`{phrase}` in a prompt is filled with a seeded random phrase that becomes the target;
    otherwise the first quoted text is the target."""
    rows = []
    for _ in range(item.rows):
        target: str | None
        if "{phrase}" in item.prompt:
            target = random_phrase(rng)
            text = item.prompt.replace("{phrase}", target)
        else:
            text = item.prompt
            match = _QUOTED.search(text)
            target = (match.group(1) or match.group(2)) if match else None
        rows.append({
            **item.reset,
            "prompt": [{"role": "user", "content": text}],
            "env": item.name,
            "target": target,
            "seed": rng.randrange(2**31),
        })
    return rows


def episode_rows(config: RunConfig, *, task_rows: dict[str, TaskRows] | None = None) -> list[dict[str, Any]]:
    """All rows of a run, shuffled with the run's seed.

    `task_rows` maps an environment name to a function that lists its tasks (for
    environments whose tasks live on the server); the others are built from the prompt.
    Every row gets every column (None where it does not apply): a dataset takes its
    columns from the first row.
    """
    rng = random.Random(config.seed)  # GRPO's seed, or the warm-up's when it runs alone
    rows: list[dict[str, Any]] = []
    for item in config.environments:
        source = (task_rows or {}).get(item.name)
        if source is None:
            rows.extend(prompt_rows(item, rng))
            continue
        for row in source(item):
            rows.append({**item.reset, **row, "env": item.name, "seed": row.get("seed", rng.randrange(2**31))})
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    rows = [{key: row.get(key) for key in columns} for row in rows]
    rng.shuffle(rows)
    return rows
