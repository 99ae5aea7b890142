"""The tally solver: reads the target from what reset said and adds up to it exactly."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envs.solvers import ToolCall

_STATE = re.compile(r"Target (\d+), tally (\d+)")


class TallySolver:
    final_text = "Done."

    def __init__(self) -> None:
        self._left = 0

    def start(self, prompt: str, row: Mapping[str, Any]) -> None:
        found = _STATE.search(prompt)
        self._left = int(found.group(1)) - int(found.group(2)) if found else 0

    def next_call(self, last_result: str | None) -> ToolCall | None:
        if last_result is not None:
            found = _STATE.search(last_result)
            self._left = int(found.group(1)) - int(found.group(2)) if found else 0
        if self._left <= 0:
            return None
        return ToolCall("add", {"count": min(3, self._left)})
