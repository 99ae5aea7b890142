"""Training rows for a run: one per episode, with the prompt and what `reset` needs."""

from __future__ import annotations

import random
import re
from typing import Any

from webapp.runs.config import RunConfig
from worker.demo_model.conversations import random_phrase

_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")


def episode_rows(config: RunConfig) -> list[dict[str, Any]]:
    """`{phrase}` in a prompt is filled with a seeded random phrase that becomes the target;
    otherwise the first quoted text is the target."""
    rng = random.Random(config.grpo.seed)
    rows: list[dict[str, Any]] = []
    for item in config.environments:
        for _ in range(item.rows):
            if "{phrase}" in item.prompt:
                target = random_phrase(rng)
                text = item.prompt.replace("{phrase}", target)
            else:
                text = item.prompt
                match = _QUOTED.search(text)
                target = (match.group(1) or match.group(2)) if match else None
            rows.append({"prompt": [{"role": "user", "content": text}], "env": item.name, "target": target})
    rng.shuffle(rows)
    return rows
