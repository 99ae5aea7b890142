"""The sudoku solver: reads the board from the text, solves it by backtracking and fills
the blanks one by one, top row first (see envs/solvers.py).

The board is re-read from every result, so a refused move or a digit placed by someone else
is taken into account; the solution is recomputed only when the board stops agreeing with
it. A puzzle with several solutions is filled with one of them, which the server counts as
solved (a full board has no conflict).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envs.solvers import ToolCall

SIZE, BOX = 9, 3
Grid = list[list[int]]

# A board row as the server draws it: "3 | 5 . 1 | . 7 . | 9 . 4 |".
_ROW = re.compile(
    r"^\s*([1-9])\s*\|((?:\s*[1-9.]){3}\s*\|(?:\s*[1-9.]){3}\s*\|(?:\s*[1-9.]){3})\s*\|\s*$"
)
OVER = ("Solved", "Out of moves")


def parse_board(text: str) -> Grid | None:
    """The last complete board drawn in ``text`` (0 for an empty cell), or None."""
    board: dict[int, list[int]] = {}
    found: Grid | None = None
    for line in text.splitlines():
        match = _ROW.match(line)
        if not match:
            continue
        number = int(match.group(1))
        cells = [0 if cell == "." else int(cell) for cell in re.findall(r"[1-9.]", match.group(2))]
        if number == 1:
            board = {}
        board[number] = cells
        if len(board) == SIZE and set(board) == set(range(1, SIZE + 1)):
            found = [board[r] for r in range(1, SIZE + 1)]
    return found


def _candidates(grid: Grid, row: int, column: int) -> set[int]:
    used = set(grid[row]) | {grid[r][column] for r in range(SIZE)}
    top, left = BOX * (row // BOX), BOX * (column // BOX)
    used |= {grid[r][c] for r in range(top, top + BOX) for c in range(left, left + BOX)}
    return set(range(1, SIZE + 1)) - used


def solve(grid: Grid) -> Grid | None:
    """A completed copy of ``grid`` (depth-first, the most constrained cell first), or None
    when it has no solution."""
    work = [row[:] for row in grid]
    for r in range(SIZE):
        for c in range(SIZE):
            digit = work[r][c]
            if digit:
                work[r][c] = 0
                if digit not in _candidates(work, r, c):
                    return None  # the givens conflict already
                work[r][c] = digit
    return work if _fill(work) else None


def _fill(grid: Grid) -> bool:
    best: tuple[int, int, set[int]] | None = None
    for r in range(SIZE):
        for c in range(SIZE):
            if grid[r][c] == 0:
                options = _candidates(grid, r, c)
                if best is None or len(options) < len(best[2]):
                    best = (r, c, options)
                    if not options:
                        return False
    if best is None:
        return True
    r, c, options = best
    for digit in sorted(options):
        grid[r][c] = digit
        if _fill(grid):
            return True
    grid[r][c] = 0
    return False


class SudokuSolver:
    final_text = "The sudoku is solved."

    def __init__(self) -> None:
        self._text = ""
        self._solution: Grid | None = None

    def start(self, prompt: str, row: Mapping[str, Any]) -> None:
        self._text = prompt
        self._solution = None

    def next_call(self, last_result: str | None) -> ToolCall | None:
        if last_result is not None:
            self._text = last_result
        if any(line.startswith(OVER) for line in self._text.splitlines()):
            return None
        board = parse_board(self._text)
        if board is None:
            return None  # no board to read
        if self._solution is None or not _agrees(board, self._solution):
            self._solution = solve(board)
            if self._solution is None:
                return None  # unsolvable as it stands: stop rather than waste moves
        for r in range(SIZE):
            for c in range(SIZE):
                if board[r][c] == 0:
                    return ToolCall(
                        "place", {"row": r + 1, "column": c + 1, "digit": self._solution[r][c]}
                    )
        return None


def _agrees(board: Grid, solution: Grid) -> bool:
    return all(
        b in (0, s)
        for board_row, solution_row in zip(board, solution, strict=True)
        for b, s in zip(board_row, solution_row, strict=True)
    )
