"""The sudoku environment as TRL sees it: one `place(row, column, digit)` tool.

`reward` is the episode's score so far (the server's latest reward): the share of the
blanks filled with the solution's digit, 1.0 once solved.
"""

from __future__ import annotations

from typing import Any

from envs.adapters.base import OpenEnvAdapter


def _check_number(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 9:
        raise ValueError(f"{name} must be a whole number from 1 to 9, got {value!r}")
    return value


class SudokuAdapter(OpenEnvAdapter):
    episode_reward = "last"  # the server reports the score so far, not an increment

    def __init__(self) -> None:
        super().__init__()
        self.progress = 0.0
        self.invalid_moves = 0
        self.solved = False
        self.cells_filled = 0  # blanks filled so far, and how many the puzzle had (reward-term attributes)
        self.blanks = 0

    def _open_client(self) -> Any:
        from envs.sudoku.client import SudokuEnv  # openenv lazily: see envs/adapters/echo.py

        return SudokuEnv(base_url=self.base_url).sync()

    def reset(self, **row: Any) -> str | None:
        self.progress = 0.0
        self.invalid_moves = 0
        self.solved = False
        self.cells_filled = 0
        self.blanks = 0
        options: dict[str, Any] = {"seed": row.get("seed")}
        if row.get("blanks") is not None:
            options["blanks"] = row["blanks"]
        result = self._start(**options)
        return "\n" + result.observation.text

    def place(self, row: int, column: int, digit: int) -> str:
        """Write a digit into an empty cell of the sudoku board.

        Args:
            row: Row of the cell, from 1 (top) to 9 (bottom).
            column: Column of the cell, from 1 (left) to 9 (right).
            digit: The digit to write, from 1 to 9.

        Returns:
            The board after the move with the progress, or why the move was refused.
        """
        from envs.sudoku.models import SudokuAction

        action = SudokuAction(
            row=_check_number("row", row),
            column=_check_number("column", column),
            digit=_check_number("digit", digit),
        )
        result = self._step(action)
        observation = result.observation
        self.reward = float(result.reward or 0.0)
        self.progress = observation.progress
        self.solved = observation.solved
        self.cells_filled = int(observation.filled)
        self.blanks = int(observation.blanks)
        self.invalid_moves = int((observation.metadata or {}).get("invalid_moves", 0))
        return str(observation.text)
