"""Catch environment server (openenv 0.10): OpenSpiel's ``catch`` game.

Run with ``python -m uvicorn envs.catch.server:app --host 127.0.0.1 --port 8000`` or
``python -m envs.catch.server --port 8000``. Episodes live on the WebSocket ``/ws``
(one environment per connection, at most ``MAX_CONCURRENT_ENVS`` per process).

A ball starts in a random column of the top row of a 10x5 grid and falls one row per
step; the paddle starts in the middle of the bottom row and moves left, stays or moves
right on each step. After 9 steps the ball lands: reward +1.0 if the paddle is under
it, -1.0 if not; 0.0 on the steps before. ``reset(seed=N)`` picks the ball's column
(OpenSpiel's chance outcome) with ``random.Random(N)``: the same seed, the same episode.

The game runs in OpenSpiel (``pyspiel``, the ``open-spiel`` wheel) when it is installed;
otherwise in ``BuiltinCatch``, a transcription of the same rules, which picks the same
ball column for the same seed (``ENGINE`` says which one runs).
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from openenv.core.env_server.interfaces import Environment

from envs.bundled_app import BundledEnvironment, create_bundled_app
from envs.catch.models import (
    COLUMNS,
    MAX_STEPS,
    ROWS,
    CatchAction,
    CatchObservation,
    CatchState,
)
from envs.common import episode_id_or_new, require_open_episode, serve

try:
    import pyspiel  # type: ignore[import-not-found, unused-ignore]  # optional wheel, no stubs
except ImportError:  # the wheel is optional: BuiltinCatch plays by the same rules
    pyspiel = None

ENV_NAME = "catch"
ENV_VERSION = "0.1.0"
ENGINE = "open_spiel" if pyspiel is not None else "builtin"

# OpenSpiel's catch actions.
ACTIONS = {"left": 0, "stay": 1, "right": 2}
LEGEND = "o = ball, P = your paddle, . = empty. The ball falls one row per move."


class CatchGame(Protocol):
    ball_row: int
    ball_column: int
    paddle_column: int

    def apply(self, action: int) -> None: ...

    def is_terminal(self) -> bool: ...

    def returns(self) -> float: ...


class BuiltinCatch:
    """OpenSpiel's catch rules (``open_spiel/games/catch``) for installs without pyspiel."""

    def __init__(self, rows: int, columns: int, rng: random.Random) -> None:
        self.rows, self.columns = rows, columns
        self.ball_column = rng.choice(range(columns))  # OpenSpiel's chance outcomes: 0..columns-1
        self.ball_row = 0
        self.paddle_column = columns // 2

    def apply(self, action: int) -> None:
        self.ball_row += 1
        self.paddle_column = min(max(self.paddle_column + action - 1, 0), self.columns - 1)

    def is_terminal(self) -> bool:
        return self.ball_row >= self.rows - 1

    def returns(self) -> float:
        if not self.is_terminal():
            return 0.0
        return 1.0 if self.ball_column == self.paddle_column else -1.0


class SpielCatch:
    """OpenSpiel's own ``catch``; positions are read back from its board string."""

    def __init__(self, rows: int, columns: int, rng: random.Random) -> None:
        game = pyspiel.load_game("catch", {"rows": rows, "columns": columns})
        self._state = game.new_initial_state()
        outcomes = [action for action, _probability in self._state.chance_outcomes()]
        self._state.apply_action(rng.choice(outcomes))
        self.ball_row = self.ball_column = self.paddle_column = 0
        self._read_positions()

    def apply(self, action: int) -> None:
        self._state.apply_action(action)
        self._read_positions()

    def is_terminal(self) -> bool:
        return bool(self._state.is_terminal())

    def returns(self) -> float:
        return float(self._state.returns()[0])

    def _read_positions(self) -> None:
        # OpenSpiel draws '.' empty, 'o' ball, 'x' paddle; the paddle hides a caught ball.
        lines = str(self._state).splitlines()
        self.paddle_column = lines[-1].index("x")
        for row, line in enumerate(lines):
            if "o" in line:
                self.ball_row, self.ball_column = row, line.index("o")
                return
        self.ball_row, self.ball_column = len(lines) - 1, self.paddle_column


def new_game(seed: int, rows: int = ROWS, columns: int = COLUMNS) -> CatchGame:
    """A game whose ball column is chosen by ``random.Random(seed)``."""
    engine = SpielCatch if pyspiel is not None else BuiltinCatch
    return engine(rows, columns, random.Random(seed))


def render_board(game: CatchGame, rows: int = ROWS, columns: int = COLUMNS) -> list[str]:
    """Grid rows, top first, cells space-separated; the paddle is drawn over a caught ball."""
    board = []
    for row in range(rows):
        cells = ["."] * columns
        if row == game.ball_row:
            cells[game.ball_column] = "o"
        if row == rows - 1:
            cells[game.paddle_column] = "P"
        board.append(" ".join(cells))
    return board


class CatchEnvironment(BundledEnvironment[CatchState], Environment[CatchAction, CatchObservation, CatchState]):
    """Catch the falling ball with the paddle."""

    NAME, VERSION = ENV_NAME, ENV_VERSION
    DESCRIPTION = (
        f"OpenSpiel's catch on a {ROWS}x{COLUMNS} grid: move the paddle left, stay "
        f"or right while the ball falls; +1 for a catch, -1 for a miss after "
        f"{MAX_STEPS} moves. reset takes a seed (engine: {ENGINE})."
    )

    def __init__(self) -> None:
        super().__init__()
        self._state = CatchState()
        self._game: CatchGame | None = None

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        rows: int | None = None,
        columns: int | None = None,
        **kwargs: Any,
    ) -> CatchObservation:
        """Start an episode; ``seed`` (optional) fixes the ball's column. ``rows`` and
        ``columns`` (optional, default 10 and 5) size the grid: the difficulty knobs (an
        episode has ``rows - 1`` moves, the ball starts up to ``columns // 2`` columns away)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        episode_id = episode_id_or_new(episode_id)
        rows = _grid_size("rows", rows, ROWS, low=3, high=20)
        columns = _grid_size("columns", columns, COLUMNS, low=2, high=9)
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)
        game = self._game = new_game(seed, rows, columns)
        self._state = CatchState(
            episode_id=episode_id,
            step_count=0,
            seed=seed,
            rows=rows,
            columns=columns,
        )
        self._sync_state(game)
        return self._observation(game, reward=None)

    def step(
        self, action: CatchAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CatchObservation:
        """Move the paddle by ``action.direction``; the ball falls one row."""
        state, game = self._state, self._game
        require_open_episode(started=game is not None, episode_id=state.episode_id, done=state.done)
        assert game is not None  # require_open_episode refused a step before any reset
        state.step_count += 1
        game.apply(ACTIONS[action.direction])
        self._sync_state(game)
        return self._observation(game, reward=game.returns())

    def _sync_state(self, game: CatchGame) -> None:
        state = self._state
        state.ball_row = game.ball_row
        state.ball_column = game.ball_column
        state.paddle_column = game.paddle_column
        state.done = game.is_terminal()
        if state.done:
            state.outcome = "caught" if game.returns() > 0 else "missed"

    def _observation(self, game: CatchGame, reward: float | None) -> CatchObservation:
        state = self._state
        board = render_board(game, state.rows, state.columns)
        rows_left = state.rows - 1 - state.ball_row
        if state.outcome == "caught":
            status = "Caught the ball! Reward +1."
        elif state.outcome == "missed":
            status = "Missed the ball. Reward -1."
        else:
            status = f"Rows left: {rows_left}. Move left or right, or stay."
        return CatchObservation(
            text="\n".join([*board, LEGEND, status]),
            board=board,
            ball_row=state.ball_row,
            ball_column=state.ball_column,
            paddle_column=state.paddle_column,
            rows_left=rows_left,
            outcome=state.outcome,
            reward=reward,
            done=state.done,
            metadata=self._episode_metadata(state.rows - 1),
        )


def _grid_size(name: str, value: object, default: int, *, low: int, high: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return value


app, envlab_marker = create_bundled_app(
    CatchEnvironment, CatchAction, CatchObservation, CatchState, name=ENV_NAME, version=ENV_VERSION
)

if __name__ == "__main__":
    serve(app, ENV_NAME)
