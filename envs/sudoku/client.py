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

from typing import Any, cast

from openenv.core.sync_client import SyncEnvClient

from envs.sudoku.models import SudokuAction, SudokuObservation, SudokuState
from envs.typed_client import TypedEnvClient


class SudokuEnv(TypedEnvClient[SudokuAction, SudokuObservation, SudokuState]):
    """Async WebSocket client: one server-side environment per client instance."""

    observation_cls = SudokuObservation
    state_cls = SudokuState


def open_sudoku_env(
    base_url: str, **kwargs: Any
) -> SyncEnvClient[SudokuAction, SudokuObservation, SudokuState]:
    """A synchronous sudoku client (not yet connected; use it as a context manager)."""
    return cast(
        SyncEnvClient[SudokuAction, SudokuObservation, SudokuState],
        SudokuEnv(base_url=base_url, **kwargs).sync(),
    )
