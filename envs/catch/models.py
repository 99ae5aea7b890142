"""Wire models of the catch environment (pydantic, shared by server and client)."""

from __future__ import annotations

from typing import Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

ROWS = 10
COLUMNS = 5
# The ball starts in the top row and falls one row per step until it reaches the paddle's.
MAX_STEPS = ROWS - 1

Direction = Literal["left", "stay", "right"]
Outcome = Literal["caught", "missed"]


class CatchAction(Action):
    """Move the paddle one column (or keep it still); the ball then falls one row."""

    direction: Direction = Field(..., description="'left', 'stay' or 'right'")


class CatchObservation(Observation):
    """What the agent sees after reset or a step.

    ``reward`` is 0.0 on every step but the last, which gives +1.0 (caught) or -1.0
    (missed); ``None`` on reset. ``metadata`` always carries ``episode_id``,
    ``step_count`` and ``max_steps``.
    """

    text: str = Field(default="", description="The grid, a legend and the moves left")
    board: list[str] = Field(
        default_factory=list,
        description="Grid rows, top first: 'o' ball, 'P' paddle, '.' empty (cells space-separated)",
    )
    ball_row: int = Field(default=0, ge=0, description="Ball's row, 0 = top")
    ball_column: int = Field(default=0, ge=0, description="Ball's column, 0 = leftmost")
    paddle_column: int = Field(default=0, ge=0, description="Paddle's column, 0 = leftmost")
    rows_left: int = Field(default=0, ge=0, description="Moves left before the ball lands")
    outcome: Outcome | None = Field(default=None, description="Set when the ball has landed")


class CatchState(State):
    """Server-side episode state (``episode_id`` and ``step_count`` come from State)."""

    seed: int | None = Field(default=None, description="Seed that chose the ball's column")
    rows: int = Field(default=ROWS)
    columns: int = Field(default=COLUMNS)
    ball_row: int = Field(default=0, ge=0)
    ball_column: int = Field(default=0, ge=0)
    paddle_column: int = Field(default=COLUMNS // 2, ge=0)
    done: bool = Field(default=False, description="Whether the episode has ended")
    outcome: Outcome | None = Field(default=None)
