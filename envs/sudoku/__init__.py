"""Sudoku environment: fill a seeded 9x9 puzzle one digit at a time.

The server lives in ``envs.sudoku.server`` (imports FastAPI; also holds the puzzle
generator); clients only need ``envs.sudoku.client`` and ``envs.sudoku.models``.
"""

from envs.sudoku.client import SudokuEnv, open_sudoku_env
from envs.sudoku.models import SudokuAction, SudokuObservation, SudokuState

__all__ = ["SudokuAction", "SudokuEnv", "SudokuObservation", "SudokuState", "open_sudoku_env"]
