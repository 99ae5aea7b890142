"""Sudoku environment server (openenv 0.10).

Run with ``python -m uvicorn envs.sudoku.server:app --host 127.0.0.1 --port 8000`` or
``python -m envs.sudoku.server --port 8000``. Episodes live on the WebSocket ``/ws``
(one environment per connection, at most ``MAX_CONCURRENT_ENVS`` per process).

Rules of an episode (``reset(seed=..., blanks=...)``):

- The puzzle comes from ``generate_puzzle(seed, blanks)``: the same seed and blanks give
  the same puzzle. Without a seed one is drawn and kept in ``state().seed``.
- A placement is refused (an *invalid move*: it still counts as a step, and in
  ``metadata["invalid_moves"]``) when the cell holds a given or an already placed digit,
  or when the digit is already in the cell's row, column or 3x3 box. Any other
  placement is accepted, even one that differs from the generator's solution; placed
  digits cannot be changed, so a wrong one can leave the puzzle unsolvable.
- ``progress`` is the share of the blanks holding the solution's digit. The episode ends
  when the board is full (solved: a full board has no conflicts) or after
  ``2 * blanks + 10`` steps.
- Every step's reward is the score so far: 1.0 when solved, otherwise ``progress``.
  It never decreases; the last step's reward is the episode's result.
"""

from __future__ import annotations

import random
from typing import Any

from openenv.core.env_server.interfaces import Environment

from envs.bundled_app import BundledEnvironment, create_bundled_app
from envs.common import episode_id_or_new, require_open_episode, serve
from envs.sudoku.models import (
    BOX,
    DEFAULT_BLANKS,
    MAX_BLANKS,
    MIN_BLANKS,
    SIZE,
    SudokuAction,
    SudokuObservation,
    SudokuState,
    max_steps_for,
)

ENV_NAME = "sudoku"
ENV_VERSION = "0.1.0"

Grid = list[list[int]]


# --- puzzles ---------------------------------------------------------------------------


def check_blanks(blanks: object) -> int:
    """``blanks`` as an int, or ValueError saying what is allowed."""
    if isinstance(blanks, bool) or not isinstance(blanks, int):
        raise ValueError(
            f"blanks must be an integer from {MIN_BLANKS} to {MAX_BLANKS}, got {blanks!r}"
        )
    if not MIN_BLANKS <= blanks <= MAX_BLANKS:
        raise ValueError(f"blanks must be from {MIN_BLANKS} to {MAX_BLANKS}, got {blanks}")
    return blanks


def _base_digit_index(row: int, column: int) -> int:
    # Each row is the first one shifted by 3 within a band and by 1 from band to band:
    # every row, column and box then holds each index exactly once.
    return (BOX * (row % BOX) + row // BOX + column) % SIZE


def _shuffled_lines(rng: random.Random) -> list[int]:
    """A permutation of 0-8 that keeps bands (or stacks) together: bands shuffled,
    lines within each band shuffled. Such permutations keep a sudoku valid."""
    bands = rng.sample(range(BOX), BOX)
    return [BOX * band + line for band in bands for line in rng.sample(range(BOX), BOX)]


def generate_puzzle(seed: int, blanks: int = DEFAULT_BLANKS) -> tuple[Grid, Grid]:
    """``(puzzle, solution)`` for ``seed``; ``puzzle`` has ``blanks`` cells set to 0.

    The solution is a base pattern with its digits, bands, stacks, rows within bands and
    columns within stacks shuffled by ``random.Random(seed)``. The puzzle is not checked
    for a unique solution: with many blanks another filling may exist (a full board
    still counts as solved).
    """
    check_blanks(blanks)
    rng = random.Random(seed)
    digits = rng.sample(range(1, SIZE + 1), SIZE)
    rows = _shuffled_lines(rng)
    columns = _shuffled_lines(rng)
    solution = [[digits[_base_digit_index(r, c)] for c in columns] for r in rows]
    puzzle = [row[:] for row in solution]
    for cell in rng.sample(range(SIZE * SIZE), blanks):
        puzzle[cell // SIZE][cell % SIZE] = 0
    return puzzle, solution


def conflicts(grid: Grid, row: int, column: int, digit: int) -> list[str]:
    """Where ``digit`` already is among the row, column and 3x3 box of a 0-based cell."""
    places = []
    if digit in grid[row]:
        places.append("row")
    if any(grid[r][column] == digit for r in range(SIZE)):
        places.append("column")
    top, left = BOX * (row // BOX), BOX * (column // BOX)
    box = (grid[r][c] for r in range(top, top + BOX) for c in range(left, left + BOX))
    if digit in box:
        places.append("3x3 box")
    return places


def render_grid(grid: Grid) -> str:
    """The board as text: numbered rows and columns, '.' for an empty cell."""
    rule = "  " + "+-------" * BOX + "+"
    lines = ["    1 2 3   4 5 6   7 8 9"]
    for r, row in enumerate(grid):
        if r % BOX == 0:
            lines.append(rule)
        cells = [str(value) if value else "." for value in row]
        boxes = (" ".join(cells[c : c + BOX]) for c in range(0, SIZE, BOX))
        lines.append(f"{r + 1} | " + " | ".join(boxes) + " |")
    lines.append(rule)
    return "\n".join(lines)


# --- the environment -------------------------------------------------------------------


class SudokuEnvironment(
    BundledEnvironment[SudokuState], Environment[SudokuAction, SudokuObservation, SudokuState]
):
    """Fill a generated sudoku one digit at a time."""

    NAME, VERSION = ENV_NAME, ENV_VERSION
    DESCRIPTION = (
        "Fill a seeded 9x9 sudoku one digit at a time (reset takes seed and "
        f"blanks, {MIN_BLANKS}-{MAX_BLANKS}). Conflicting or overwriting moves are "
        "refused; the reward is the share of blanks filled correctly, 1.0 when solved."
    )

    def __init__(self) -> None:
        super().__init__()
        self._state = SudokuState()
        self._solution: Grid = []
        self._given: list[list[bool]] = []
        self._correct = 0  # blanks holding the solution's digit
        self._started = False

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        blanks: int | None = None,
        **kwargs: Any,
    ) -> SudokuObservation:
        """Start an episode on the puzzle of ``seed`` with ``blanks`` empty cells (1-64)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        blanks = DEFAULT_BLANKS if blanks is None else check_blanks(blanks)
        episode_id = episode_id_or_new(episode_id)
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)
        puzzle, self._solution = generate_puzzle(seed, blanks)
        self._given = [[value != 0 for value in row] for row in puzzle]
        self._correct = 0
        self._state = SudokuState(
            episode_id=episode_id,
            step_count=0,
            seed=seed,
            blanks=blanks,
            max_steps=max_steps_for(blanks),
            grid=puzzle,
        )
        self._started = True
        message = (
            f"New sudoku: fill the {blanks} empty cells ('.') so that every row, column "
            "and 3x3 box holds the digits 1-9 once."
        )
        return self._observation(message=message, accepted=None, reward=None)

    def step(
        self, action: SudokuAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SudokuObservation:
        """Place ``action.digit`` at ``action.row``, ``action.column`` if the rules allow."""
        state = self._state
        require_open_episode(started=self._started, episode_id=state.episode_id, done=state.done)
        state.step_count += 1
        row, column, digit = action.row - 1, action.column - 1, action.digit
        refusal = self._refusal(row, column, digit)
        if refusal is None:
            state.grid[row][column] = digit
            state.filled += 1
            if digit == self._solution[row][column]:
                self._correct += 1
            message = f"Placed {digit} at row {action.row}, column {action.column}."
        else:
            state.invalid_moves += 1
            message = f"Invalid move: {refusal}"
        state.progress = self._correct / state.blanks
        state.solved = state.filled == state.blanks
        state.done = state.solved or state.step_count >= state.max_steps
        reward = 1.0 if state.solved else state.progress
        return self._observation(message=message, accepted=refusal is None, reward=reward)

    def _refusal(self, row: int, column: int, digit: int) -> str | None:
        where = f"row {row + 1}, column {column + 1}"
        current = self._state.grid[row][column]
        if self._given[row][column]:
            return f"{where} holds a given digit ({current}); choose an empty cell ('.')."
        if current:
            return f"{where} is already filled ({current}); placed digits cannot be changed."
        places = conflicts(self._state.grid, row, column, digit)
        if places:
            return (
                f"{digit} cannot go at {where}: it is already in the same {' and '.join(places)}."
            )
        return None

    def _status(self) -> str:
        state, correct = self._state, self._correct
        if state.solved:
            return "Solved: every cell is filled. Reward 1.00."
        if state.done:
            return (
                f"Out of moves: {correct}/{state.blanks} empty cells filled correctly. "
                f"Reward {state.progress:.2f}."
            )
        steps_left = state.max_steps - state.step_count
        return (
            f"Filled {state.filled}/{state.blanks} empty cells, {correct} correctly "
            f"(progress {state.progress:.2f}); {steps_left} moves left."
        )

    def _observation(
        self, message: str, accepted: bool | None, reward: float | None
    ) -> SudokuObservation:
        state = self._state
        grid = [row[:] for row in state.grid]
        return SudokuObservation(
            text=f"{message}\n{render_grid(grid)}\n{self._status()}",
            grid=grid,
            message=message,
            accepted=accepted,
            blanks=state.blanks,
            filled=state.filled,
            progress=state.progress,
            solved=state.solved,
            steps_left=state.max_steps - state.step_count,
            reward=reward,
            done=state.done,
            metadata={
                **self._episode_metadata(state.max_steps),
                "invalid_moves": state.invalid_moves,
                "blanks": state.blanks,
                "filled": state.filled,
            },
        )


app, envlab_marker = create_bundled_app(
    SudokuEnvironment, SudokuAction, SudokuObservation, SudokuState, name=ENV_NAME, version=ENV_VERSION
)

if __name__ == "__main__":
    serve(app, ENV_NAME)
