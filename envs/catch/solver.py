"""The catch solver: moves the paddle toward the ball's column, read from the drawn grid
(see envs/solvers.py). The paddle starts at most two columns from the ball, which falls
nine rows: it always catches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.solvers import ToolCall

BALL, PADDLE = "o", "P"
OVER = ("Caught the ball", "Missed the ball")


def positions(text: str) -> tuple[int | None, int | None]:
    """(ball column, paddle column) in the last grid drawn in ``text`` (rows of
    space-separated cells, the paddle's row last); None for what is not drawn. The paddle
    hides a ball it caught."""
    blocks: list[list[list[str]]] = [[]]
    for line in text.splitlines():
        if _is_grid_row(line):
            blocks[-1].append(line.split(" "))
        elif blocks[-1]:
            blocks.append([])
    rows = next((block for block in reversed(blocks) if block), [])
    if not rows:
        return None, None
    paddle = rows[-1].index(PADDLE) if PADDLE in rows[-1] else None
    ball = next((row.index(BALL) for row in rows if BALL in row), paddle)
    return ball, paddle


def _is_grid_row(line: str) -> bool:
    cells = line.split(" ")
    return len(cells) > 1 and all(cell in (".", BALL, PADDLE) for cell in cells)


class CatchSolver:
    def __init__(self) -> None:
        self._text = ""

    @property
    def final_text(self) -> str:
        return "Missed the ball." if OVER[1] in self._text else "Caught the ball."

    def start(self, prompt: str, row: Mapping[str, Any]) -> None:
        self._text = prompt

    def next_call(self, last_result: str | None) -> ToolCall | None:
        if last_result is not None:
            self._text = last_result
        if any(outcome in self._text for outcome in OVER):
            return None
        ball, paddle = positions(self._text)
        if ball is None or paddle is None:
            return None  # no grid to read: nothing sensible to do
        if ball < paddle:
            return ToolCall("move", {"direction": "left"})
        if ball > paddle:
            return ToolCall("move", {"direction": "right"})
        return ToolCall("stay")
