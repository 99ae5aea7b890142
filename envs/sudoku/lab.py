"""The Sudoku environment as the lab knows it (envs/spec.py)."""

from collections.abc import Mapping, Sequence
from typing import Any

from envs.spec import (
    COMMON_ATTRIBUTES,
    COUNT,
    AdapterSpec,
    BundledSpec,
    Column,
    mean,
    openenv_server,
    summed,
)


def cells_correct(played: Sequence[Mapping[str, Any]], attributes: Sequence[Mapping[str, float]]) -> float | None:
    return mean([round(float(a.get("progress", 0.0)) * float(a.get("blanks", 0.0))) for a in attributes])


LAB = BundledSpec(
    **openenv_server("sudoku", "Sudoku", 8104),
    adapter=AdapterSpec(
        "sudoku", "envs.adapters.sudoku.SudokuAdapter", ("place",), "SudokuAction", ("row", "column", "digit")
    ),
    solver="envs.sudoku.solver.SudokuSolver",
    attributes=(
        ("won", "1 if the board was solved"),
        ("solved", "1 if the board was solved"),
        ("progress", "share of the blanks holding the solution's digit (0 to 1)"),
        ("cells_filled", "blanks filled so far"),
        ("blanks", "empty cells the puzzle started with"),
        ("invalid_moves", "placements refused (a given or an already placed digit)"),
        *COMMON_ATTRIBUTES,
        ("meta_max_steps", "moves allowed (server metadata)"),
    ),
    ranges={
        "solved": (0.0, 1.0), "progress": (0.0, 1.0), "cells_filled": (0.0, 81.0),
        "blanks": (0.0, 81.0), "invalid_moves": COUNT,
    },
    prompt="Solve the Sudoku: place digits with the place tool until the board is full.",
    columns=(
        Column("solved", "boards solved", summed("solved")),
        Column("cells_correct", "mean blanks holding the solution's digit, per episode", cells_correct),
    ),
    renderer="sudoku",
)
