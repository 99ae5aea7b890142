"""The echo solver: says the phrase the prompt asks for, once (see envs/solvers.py).

The phrase is what the prompt quotes (``Echo 'hello world'.``, ``Say "red fish" ...``) or
what follows ``Repeat exactly:``; a prompt that names none falls back on the row's
``target``, the phrase the dataset filled into the prompt (worker/datasets.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envs.solvers import ToolCall

_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"|“([^”]+)”")
_REPEAT = re.compile(r"Repeat exactly:\s*(.+)")


def phrase_in(prompt: str) -> str | None:
    """The phrase a prompt asks to echo, or None when it quotes none."""
    match = _QUOTED.search(prompt)
    if match:
        return next(group for group in match.groups() if group is not None).strip() or None
    match = _REPEAT.search(prompt)
    return match.group(1).strip() or None if match else None


class EchoSolver:
    final_text = "Done."

    def __init__(self) -> None:
        self._phrase: str | None = None
        self._said = False

    def start(self, prompt: str, row: Mapping[str, Any]) -> None:
        target = row.get("target")
        self._phrase = phrase_in(prompt) or (
            target if isinstance(target, str) and target.strip() else None
        )
        self._said = False

    def next_call(self, last_result: str | None) -> ToolCall | None:
        # One call: an exact repeat scores 1.0 and ends the episode; the echo is the result.
        if self._said or self._phrase is None:
            return None
        self._said = True
        return ToolCall("echo", {"message": self._phrase})
