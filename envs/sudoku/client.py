"""Client for the sudoku environment.

Synchronous use (openenv's clients are async; ``.sync()`` wraps one)::

    from envs.sudoku.client import open_sudoku_env
    from envs.sudoku.models import SudokuAction

    with open_sudoku_env("http://127.0.0.1:8000") as env:
        result = env.reset(seed=7, blanks=20)
        print(result.observation.text)
        result = env.step(SudokuAction(row=1, column=3, digit=4))
        result.observation.accepted, result.observation.progress, result.reward

Server-side errors (over capacity, stepping a finished episode, a bad ``blanks``)
surface as ``RuntimeError("Server error: <message> (code: <CODE>)")``.
"""

from __future__ import annotations

from envs.sudoku.models import SudokuAction, SudokuObservation, SudokuState
from envs.typed_client import TypedEnvClient


class SudokuEnv(TypedEnvClient[SudokuAction, SudokuObservation, SudokuState]):
    """Async WebSocket client: one server-side environment per client instance."""

    observation_cls = SudokuObservation
    state_cls = SudokuState


# A synchronous sudoku client (not yet connected; use it as a context manager).
open_sudoku_env = SudokuEnv.open_sync
