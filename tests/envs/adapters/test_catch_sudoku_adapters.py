"""The catch and sudoku adapters as TRL uses them, against real environment servers."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from transformers.utils import get_json_schema

from envs.adapters import adapter_class
from envs.adapters.catch import CatchAdapter
from envs.adapters.sudoku import SudokuAdapter
from envs.registry import adapter_for
from envs.sudoku.server import generate_puzzle
from tests.envs.servers import run_env_server
from tests.support.tool_schemas import tool_schema

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "OPENENV_MODE": "simulation"}
GRID_STATUS = "o = ball, P = your paddle, . = empty. The ball falls one row per move."


def trl_tool_names(cls: type) -> list[str]:
    """The methods GRPOTrainer turns into tools (trl 1.16's rule)."""
    return [
        name
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def grid_rows(text: str) -> list[list[str]]:
    return [line.split(" ") for line in text.strip("\n").splitlines()[:10]]


def ball_and_paddle(text: str) -> tuple[int, int]:
    rows = grid_rows(text)
    ball = next(row.index("o") for row in rows if "o" in row)
    return ball, rows[-1].index("P")


@pytest.fixture(scope="module")
def catch_url() -> Iterator[str]:
    with run_env_server("envs.catch.server:app", SERVER_ENV) as url:
        yield url


@pytest.fixture(scope="module")
def sudoku_url() -> Iterator[str]:
    with run_env_server("envs.sudoku.server:app", SERVER_ENV) as url:
        yield url


@pytest.fixture
def catch(catch_url: str) -> Iterator[Any]:
    adapter = adapter_class(metadata_name="catch", base_url=catch_url, env_name="catch")()
    yield adapter
    adapter._close()


@pytest.fixture
def sudoku(sudoku_url: str) -> Iterator[Any]:
    adapter = adapter_class(metadata_name="sudoku", base_url=sudoku_url, env_name="sudoku")()
    yield adapter
    adapter._close()


# --- what TRL sees ----------------------------------------------------------------


def test_tools_match_the_registry() -> None:
    assert trl_tool_names(CatchAdapter) == ["move", "stay"]
    assert trl_tool_names(SudokuAdapter) == ["place"]
    for name, cls in (("catch", CatchAdapter), ("sudoku", SudokuAdapter)):
        spec = adapter_for(name)
        assert spec is not None
        assert spec.adapter_path == f"{cls.__module__}.{cls.__name__}"
        assert list(spec.tool_names) == trl_tool_names(cls)


def test_tool_schemas() -> None:
    grid_after = "The grid after the move, and the outcome once the ball has landed."
    assert get_json_schema(CatchAdapter.move) == tool_schema(
        "move",
        "Move the paddle one column; the ball then falls one row.",
        {
            "direction": {
                "type": "string",
                "enum": ["left", "right"],
                "description": "Which way to move the paddle.",
            }
        },
        required=["direction"],
        returns=grid_after,
    )
    assert get_json_schema(CatchAdapter.stay) == tool_schema(
        "stay", "Keep the paddle where it is; the ball falls one row.", {}, returns=grid_after
    )
    assert get_json_schema(SudokuAdapter.place) == tool_schema(
        "place",
        "Write a digit into an empty cell of the sudoku board.",
        {
            "row": {"type": "integer", "description": "Row of the cell, from 1 (top) to 9 (bottom)."},
            "column": {"type": "integer", "description": "Column of the cell, from 1 (left) to 9 (right)."},
            "digit": {"type": "integer", "description": "The digit to write, from 1 to 9."},
        },
        required=["row", "column", "digit"],
        returns="The board after the move with the progress, or why the move was refused.",
    )


# --- catch ------------------------------------------------------------------------


def test_catch_reset_is_seeded(catch: Any, catch_url: str) -> None:
    first = catch.reset(seed=4, prompt="ignored")
    other = adapter_class(metadata_name="catch", base_url=catch_url, env_name="catch")()
    try:
        assert other.reset(seed=4) == first
    finally:
        other._close()
    assert first.startswith("\n")
    lines = first[1:].splitlines()
    assert len(lines) == 12
    assert lines[-2:] == [GRID_STATUS, "Rows left: 9. Move left or right, or stay."]
    assert (catch.reward, catch.won, catch.done, catch.tool_calls) == (0.0, False, False, 0)


def test_catch_win(catch: Any) -> None:
    text = catch.reset(seed=0)
    for _ in range(9):
        ball, paddle = ball_and_paddle(text)
        text = catch.stay() if ball == paddle else catch.move("left" if ball < paddle else "right")
        if not catch.done:
            assert catch.reward == 0.0
    assert text.splitlines()[-1] == "Caught the ball! Reward +1."
    assert (catch.reward, catch.won, catch.done, catch.lost) == (1.0, True, True, False)
    assert (catch.tool_calls, catch.tool_failures) == (9, 0)
    with pytest.raises(RuntimeError, match=r"^Game over\.$"):
        catch.stay()
    assert catch.tool_calls == 9


def test_catch_loss_keeps_minus_one(catch: Any) -> None:
    text = catch.reset(seed=0)
    ball, _ = ball_and_paddle(text)
    away = "left" if ball >= 2 else "right"
    for _ in range(9):
        text = catch.move(away)
    assert text.splitlines()[-1] == "Missed the ball. Reward -1."
    assert (catch.reward, catch.won, catch.done) == (-1.0, False, True)
    with pytest.raises(RuntimeError, match=r"^Game over\.$"):
        catch.move("left")

    catch.reset(seed=0)  # a new episode starts clean
    assert (catch.reward, catch.won, catch.done, catch.tool_calls) == (0.0, False, False, 0)


@pytest.mark.parametrize("direction", ["up", "stay", "", 2])
def test_catch_move_rejects_other_directions(catch: Any, direction: Any) -> None:
    catch.reset(seed=1)
    with pytest.raises(ValueError) as excinfo:
        catch.move(direction)
    assert str(excinfo.value) == (
        f"direction must be 'left' or 'right', got {direction!r} "
        "(call stay() to keep the paddle where it is)"
    )
    assert catch.tool_calls == 0  # nothing reached the server
    assert catch.move(" Left ").splitlines()[-1] == "Rows left: 8. Move left or right, or stay."


# --- sudoku -----------------------------------------------------------------------


def test_sudoku_reset_uses_seed_and_blanks(sudoku: Any) -> None:
    text = sudoku.reset(seed=12, blanks=7, prompt="ignored")
    assert text.startswith("\nNew sudoku: fill the 7 empty cells ('.')")
    assert (
        text.splitlines()[-1]
        == "Filled 0/7 empty cells, 0 correctly (progress 0.00); 24 moves left."
    )
    default = sudoku.reset(seed=12)
    assert "fill the 20 empty cells" in default
    assert sudoku.reset(seed=12, blanks=None) == default
    assert (sudoku.progress, sudoku.invalid_moves, sudoku.solved, sudoku.done) == (
        0.0,
        0,
        False,
        False,
    )


def test_sudoku_bad_blanks_fail_the_reset(sudoku: Any) -> None:
    with pytest.raises(RuntimeError) as excinfo:
        sudoku.reset(seed=1, blanks=70)
    assert str(excinfo.value) == (
        "Server error: blanks must be from 1 to 64, got 70 (code: EXECUTION_ERROR)"
    )


def test_sudoku_solve_with_an_invalid_move(sudoku: Any) -> None:
    puzzle, solution = generate_puzzle(30, 2)
    blanks = [(r, c) for r in range(9) for c in range(9) if puzzle[r][c] == 0]
    given = next((r, c) for r in range(9) for c in range(9) if puzzle[r][c])
    sudoku.reset(seed=30, blanks=2)

    refused = sudoku.place(given[0] + 1, given[1] + 1, 5)
    assert refused.splitlines()[0].startswith(
        f"Invalid move: row {given[0] + 1}, column {given[1] + 1} holds a given digit"
    )
    assert (sudoku.invalid_moves, sudoku.progress, sudoku.reward, sudoku.done) == (
        1,
        0.0,
        0.0,
        False,
    )

    (r, c) = blanks[0]
    half = sudoku.place(r + 1, c + 1, solution[r][c])
    assert half.splitlines()[0] == f"Placed {solution[r][c]} at row {r + 1}, column {c + 1}."
    assert (sudoku.progress, sudoku.reward, sudoku.solved) == (0.5, 0.5, False)

    (r, c) = blanks[1]
    done = sudoku.place(r + 1, c + 1, solution[r][c])
    assert done.splitlines()[-1] == "Solved: every cell is filled. Reward 1.00."
    assert (sudoku.progress, sudoku.reward, sudoku.solved, sudoku.done) == (1.0, 1.0, True, True)
    assert (sudoku.invalid_moves, sudoku.tool_calls, sudoku.tool_failures, sudoku.lost) == (
        1,
        3,
        0,
        False,
    )
    with pytest.raises(RuntimeError, match=r"^Game over\.$"):
        sudoku.place(1, 1, 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 1, 1), "row must be a whole number from 1 to 9, got 0"),
        ((1, 10, 1), "column must be a whole number from 1 to 9, got 10"),
        ((1, 1, "5"), "digit must be a whole number from 1 to 9, got '5'"),
        ((True, 1, 1), "row must be a whole number from 1 to 9, got True"),
    ],
)
def test_sudoku_place_rejects_out_of_range(
    sudoku: Any, args: tuple[Any, ...], message: str
) -> None:
    sudoku.reset(seed=2)
    with pytest.raises(ValueError) as excinfo:
        sudoku.place(*args)
    assert str(excinfo.value) == message
    assert (sudoku.tool_calls, sudoku.invalid_moves) == (0, 0)
