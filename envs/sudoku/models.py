"""Wire models of the sudoku environment (pydantic, shared by server and client)."""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

SIZE = 9
BOX = 3
DEFAULT_BLANKS = 20
MIN_BLANKS = 1
MAX_BLANKS = 64


def max_steps_for(blanks: int) -> int:
    """Steps allowed in an episode with ``blanks`` empty cells (invalid moves count too)."""
    return 2 * blanks + 10


class SudokuAction(Action):
    """Write ``digit`` into the empty cell at ``row``, ``column`` (both numbered 1-9)."""

    row: int = Field(..., ge=1, le=SIZE, description="Row, 1 (top) to 9 (bottom)")
    column: int = Field(..., ge=1, le=SIZE, description="Column, 1 (left) to 9 (right)")
    digit: int = Field(..., ge=1, le=SIZE, description="Digit to place, 1 to 9")


class SudokuObservation(Observation):
    """What the agent sees after reset or a step.

    ``reward`` (on steps; ``None`` on reset) is the episode's score so far: 1.0 once the
    board is full (a full board never has a conflict, so it is solved), otherwise
    ``progress``. It never decreases, and the last one is the episode's result.

    ``metadata`` always carries ``episode_id``, ``step_count`` (every step, invalid moves
    included), ``max_steps``, ``invalid_moves``, ``blanks`` and ``filled``.
    """

    text: str = Field(default="", description="Last move's result, the board and the status")
    grid: list[list[int]] = Field(
        default_factory=list, description="The board, 9 rows of 9 digits; 0 is an empty cell"
    )
    message: str = Field(default="", description="What the last move did, or why it was refused")
    accepted: bool | None = Field(
        default=None, description="Whether the last move was placed (None after reset)"
    )
    blanks: int = Field(default=0, ge=0, description="Empty cells the puzzle started with")
    filled: int = Field(default=0, ge=0, description="Empty cells filled so far")
    progress: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Cells filled with the solution's digit / blanks"
    )
    solved: bool = Field(default=False, description="Whether the board is full")
    steps_left: int = Field(default=0, ge=0, description="Steps left before the episode ends")


class SudokuState(State):
    """Server-side episode state; the solution is never part of it."""

    seed: int | None = Field(default=None, description="Seed the puzzle was generated from")
    blanks: int = Field(default=DEFAULT_BLANKS, ge=MIN_BLANKS, le=MAX_BLANKS)
    max_steps: int = Field(default=max_steps_for(DEFAULT_BLANKS), ge=1)
    grid: list[list[int]] = Field(default_factory=list, description="The board; 0 is empty")
    filled: int = Field(default=0, ge=0, description="Empty cells filled so far")
    progress: float = Field(default=0.0, ge=0.0, le=1.0)
    invalid_moves: int = Field(default=0, ge=0, description="Moves refused so far")
    solved: bool = Field(default=False)
    done: bool = Field(default=False, description="Whether the episode has ended")
