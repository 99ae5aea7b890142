"""The sudoku environment over the wire: a real uvicorn server, the real client.

The tests know each puzzle's solution by calling the generator in-process with the
episode's seed; the server never reveals it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envs.sudoku.client import open_sudoku_env
from envs.sudoku.models import SudokuAction, SudokuState
from envs.sudoku.server import (
    SudokuEnvironment,
    check_blanks,
    conflicts,
    generate_puzzle,
    render_grid,
)
from tests.envs.servers import run_env_server
from tests.envs.wire import (
    SERVER_ENV,
    assert_bundled_routes,
    assert_openenv_validate_passes,
    assert_session_refused,
    over_error,
    server_error,
    two_session_server,
)

APP = "envs.sudoku.server:app"
Cell = tuple[int, int]






def blank_cells(puzzle: list[list[int]]) -> list[Cell]:
    """0-based (row, column) of the empty cells, in reading order."""
    return [(r, c) for r in range(9) for c in range(9) if puzzle[r][c] == 0]


def wrong_but_allowed(puzzle: list[list[int]], solution: list[list[int]]) -> tuple[Cell, int]:
    """An empty cell and a digit that conflicts with nothing yet is not the solution's."""
    for r, c in blank_cells(puzzle):
        for digit in range(1, 10):
            if digit != solution[r][c] and not conflicts(puzzle, r, c, digit):
                return (r, c), digit
    raise AssertionError("every empty cell has a single candidate")


def assert_valid_solution(grid: list[list[int]]) -> None:
    digits = list(range(1, 10))
    for i in range(9):
        top, left = 3 * (i // 3), 3 * (i % 3)
        assert sorted(grid[i]) == digits
        assert sorted(row[i] for row in grid) == digits
        assert (
            sorted(grid[r][c] for r in range(top, top + 3) for c in range(left, left + 3)) == digits
        )


@pytest.fixture(scope="module")
def sudoku_url() -> Iterator[str]:
    with run_env_server(APP, {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "8"}) as url:
        yield url


# --- in-process units -------------------------------------------------------------


def test_generator_is_seeded_and_valid() -> None:
    for seed in range(30):
        puzzle, solution = generate_puzzle(seed, 20)
        assert_valid_solution(solution)
        assert generate_puzzle(seed, 20) == (puzzle, solution)
        assert len(blank_cells(puzzle)) == 20
        assert all(puzzle[r][c] in (0, solution[r][c]) for r in range(9) for c in range(9))
    solutions = {str(generate_puzzle(seed, 20)[1]) for seed in range(30)}
    assert len(solutions) == 30
    assert len(blank_cells(generate_puzzle(4, 64)[0])) == 64
    assert len(blank_cells(generate_puzzle(4, 1)[0])) == 1
    assert generate_puzzle(4, 5)[1] == generate_puzzle(4, 64)[1]  # blanks don't move digits


@pytest.mark.parametrize(
    ("blanks", "message"),
    [
        (0, "blanks must be from 1 to 64, got 0"),
        (65, "blanks must be from 1 to 64, got 65"),
        ("20", "blanks must be an integer from 1 to 64, got '20'"),
        (2.5, "blanks must be an integer from 1 to 64, got 2.5"),
        (True, "blanks must be an integer from 1 to 64, got True"),
    ],
)
def test_check_blanks_rejects(blanks: object, message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        check_blanks(blanks)
    assert str(excinfo.value) == message


def test_conflicts_names_row_column_and_box() -> None:
    grid = [[0] * 9 for _ in range(9)]
    grid[0][8] = 5  # same row as (0, 0)
    grid[8][0] = 6  # same column
    grid[1][1] = 7  # same box
    grid[4][4] = 5  # unrelated
    assert conflicts(grid, 0, 0, 5) == ["row"]
    assert conflicts(grid, 0, 0, 6) == ["column"]
    assert conflicts(grid, 0, 0, 7) == ["3x3 box"]
    assert conflicts(grid, 0, 0, 1) == []
    grid[0][1] = 9
    assert conflicts(grid, 0, 0, 9) == ["row", "3x3 box"]


def test_render_grid() -> None:
    puzzle, _ = generate_puzzle(7, 20)
    lines = render_grid(puzzle).splitlines()
    assert len(lines) == 14
    assert lines[0] == "    1 2 3   4 5 6   7 8 9"
    assert lines[1] == lines[5] == lines[9] == lines[13] == "  +-------+-------+-------+"
    digits = [str(v) if v else "." for v in puzzle[0]]
    assert lines[2] == "1 | {} {} {} | {} {} {} | {} {} {} |".format(*digits)
    assert lines[12].startswith("9 | ")


def test_reset_rejects_bad_arguments() -> None:
    env = SudokuEnvironment()
    with pytest.raises(ValueError, match=r"^seed must be an integer, got 1\.5$"):
        env.reset(seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^blanks must be from 1 to 64, got 81$"):
        env.reset(seed=1, blanks=81)
    assert env.reset(blanks=3).metadata["blanks"] == 3
    assert isinstance(env.state.seed, int)  # drawn, and kept to replay the puzzle
    assert env.state.grid == generate_puzzle(env.state.seed, 3)[0]


# --- over the wire ----------------------------------------------------------------


def test_http_routes(sudoku_url: str) -> None:
    description, schema = assert_bundled_routes(
        sudoku_url, "sudoku", action="SudokuAction", required=["row", "column", "digit"],
        state=["seed", "blanks", "max_steps", "grid", "filled", "progress", "invalid_moves", "solved", "done"],
    )
    assert description == (
        "Fill a seeded 9x9 sudoku one digit at a time (reset takes seed and blanks, "
        "1-64). Conflicting or overwriting moves are refused; the reward is the share "
        "of blanks filled correctly, 1.0 when solved."
    )
    for name in ("row", "column", "digit"):
        assert schema["action"]["properties"][name]["minimum"] == 1
        assert schema["action"]["properties"][name]["maximum"] == 9


def test_reset_shows_the_puzzle(sudoku_url: str) -> None:
    puzzle, _ = generate_puzzle(5, 20)
    with open_sudoku_env(sudoku_url) as env:
        result = env.reset(seed=5)
        observation = result.observation
        episode_id = observation.metadata["episode_id"]
        message = (
            "New sudoku: fill the 20 empty cells ('.') so that every row, column and 3x3 "
            "box holds the digits 1-9 once."
        )
        assert (result.reward, result.done) == (None, False)
        assert observation.grid == puzzle
        assert observation.text == (
            f"{message}\n{render_grid(puzzle)}\n"
            "Filled 0/20 empty cells, 0 correctly (progress 0.00); 50 moves left."
        )
        assert (observation.message, observation.accepted) == (message, None)
        assert (observation.blanks, observation.filled, observation.progress) == (20, 0, 0.0)
        assert (observation.solved, observation.steps_left) == (False, 50)
        assert observation.metadata == {
            "episode_id": episode_id,
            "step_count": 0,
            "max_steps": 50,
            "invalid_moves": 0,
            "blanks": 20,
            "filled": 0,
        }
        state = env.state()
        assert state == SudokuState(
            episode_id=episode_id, step_count=0, seed=5, blanks=20, max_steps=50, grid=puzzle
        )
        # The solution is nowhere in the state.
        assert set(state.model_dump()) == set(SudokuState.model_fields)

        again = env.reset(seed=5)
        assert again.observation.text == observation.text
        assert again.observation.metadata["episode_id"] != episode_id
        other = env.reset(seed=6, blanks=30)
        assert other.observation.grid == generate_puzzle(6, 30)[0]
        assert other.observation.metadata["max_steps"] == 70


def test_invalid_moves_are_counted_steps(sudoku_url: str) -> None:
    puzzle, solution = generate_puzzle(9, 20)
    (r, c) = blank_cells(puzzle)[0]
    given = next((gr, gc) for gr in range(9) for gc in range(9) if puzzle[gr][gc])
    in_row = next(v for v in puzzle[r] if v)
    with open_sudoku_env(sudoku_url) as env:
        env.reset(seed=9)
        refused_given = env.step(
            SudokuAction(row=given[0] + 1, column=given[1] + 1, digit=solution[given[0]][given[1]])
        )
        refused_conflict = env.step(SudokuAction(row=r + 1, column=c + 1, digit=in_row))
        placed = env.step(SudokuAction(row=r + 1, column=c + 1, digit=solution[r][c]))
        refused_filled = env.step(SudokuAction(row=r + 1, column=c + 1, digit=solution[r][c]))
    steps = (refused_given, refused_conflict, placed, refused_filled)

    where_given = f"row {given[0] + 1}, column {given[1] + 1}"
    where = f"row {r + 1}, column {c + 1}"
    places = " and ".join(conflicts(puzzle, r, c, in_row))
    assert [x.observation.message for x in steps] == [
        f"Invalid move: {where_given} holds a given digit ({puzzle[given[0]][given[1]]}); "
        "choose an empty cell ('.').",
        f"Invalid move: {in_row} cannot go at {where}: it is already in the same {places}.",
        f"Placed {solution[r][c]} at {where}.",
        f"Invalid move: {where} is already filled ({solution[r][c]}); "
        "placed digits cannot be changed.",
    ]
    assert [x.observation.accepted for x in steps] == [
        False,
        False,
        True,
        False,
    ]
    assert [x.reward for x in steps] == [
        0.0,
        0.0,
        0.05,
        0.05,
    ]
    assert [
        (x.observation.metadata["step_count"], x.observation.metadata["invalid_moves"])
        for x in steps
    ] == [(1, 1), (2, 2), (3, 2), (4, 3)]
    assert refused_conflict.observation.grid == puzzle
    assert refused_filled.observation.filled == 1
    assert refused_filled.observation.steps_left == 46
    assert refused_filled.done is False
    assert refused_filled.observation.text.splitlines()[0] == refused_filled.observation.message
    assert refused_filled.observation.text.splitlines()[-1] == (
        "Filled 1/20 empty cells, 1 correctly (progress 0.05); 46 moves left."
    )


def test_progress_counts_only_the_solution_digits(sudoku_url: str) -> None:
    puzzle, solution = generate_puzzle(3, 40)
    (wr, wc), wrong = wrong_but_allowed(puzzle, solution)
    after = [row[:] for row in puzzle]
    after[wr][wc] = wrong
    (r, c) = next(
        cell
        for cell in blank_cells(after)
        if not conflicts(after, *cell, solution[cell[0]][cell[1]])
    )
    with open_sudoku_env(sudoku_url) as env:
        env.reset(seed=3, blanks=40)
        accepted_wrong = env.step(SudokuAction(row=wr + 1, column=wc + 1, digit=wrong))
        right = env.step(SudokuAction(row=r + 1, column=c + 1, digit=solution[r][c]))
        state = env.state()
    assert (accepted_wrong.observation.accepted, accepted_wrong.observation.filled) == (True, 1)
    assert (accepted_wrong.observation.progress, accepted_wrong.reward) == (0.0, 0.0)
    assert (right.observation.filled, right.observation.progress, right.reward) == (2, 0.025, 0.025)
    assert right.observation.grid[wr][wc] == wrong
    assert (state.filled, state.progress, state.invalid_moves, state.step_count) == (2, 0.025, 0, 2)


def test_solving_ends_the_episode_with_reward_one(sudoku_url: str) -> None:
    puzzle, solution = generate_puzzle(21, 3)
    with open_sudoku_env(sudoku_url) as env:
        episode_id = env.reset(seed=21, blanks=3).observation.metadata["episode_id"]
        results = [
            env.step(SudokuAction(row=r + 1, column=c + 1, digit=solution[r][c]))
            for r, c in blank_cells(puzzle)
        ]
        assert [x.reward for x in results] == [pytest.approx(1 / 3), pytest.approx(2 / 3), 1.0]
        assert [x.done for x in results] == [False, False, True]
        final = results[-1].observation
        assert (final.solved, final.progress, final.filled, final.grid) == (True, 1.0, 3, solution)
        assert final.text.splitlines()[-1] == "Solved: every cell is filled. Reward 1.00."
        state = env.state()
        assert (state.solved, state.done, state.step_count, state.grid) == (True, True, 3, solution)

        assert server_error(lambda: env.step(SudokuAction(row=1, column=1, digit=1))) == over_error(episode_id)
        assert env.state().step_count == 3


def test_running_out_of_moves(sudoku_url: str) -> None:
    puzzle, solution = generate_puzzle(8, 1)
    (r, c) = blank_cells(puzzle)[0]
    given_row, given_column = (r + 1) % 9, c  # a given cell: the only blank is (r, c)
    with open_sudoku_env(sudoku_url) as env:
        episode_id = env.reset(seed=8, blanks=1).observation.metadata["episode_id"]
        action = SudokuAction(row=given_row + 1, column=given_column + 1, digit=1)
        results = [env.step(action) for _ in range(12)]
        assert [x.done for x in results] == [False] * 11 + [True]
        assert {x.reward for x in results} == {0.0}
        final = results[-1].observation
        assert final.metadata["invalid_moves"] == final.metadata["step_count"] == 12
        assert (final.steps_left, final.solved) == (0, False)
        assert final.text.splitlines()[-1] == (
            "Out of moves: 0/1 empty cells filled correctly. Reward 0.00."
        )
        solving = SudokuAction(row=r + 1, column=c + 1, digit=solution[r][c])
        assert server_error(lambda: env.step(solving)) == over_error(episode_id)


def test_step_before_reset_is_an_error(sudoku_url: str) -> None:
    with open_sudoku_env(sudoku_url) as env:
        assert server_error(lambda: env.step(SudokuAction(row=1, column=1, digit=1))) == (
            "Server error: No episode in progress: call reset() first (a restarted server "
            "gives a reconnecting client a fresh environment) (code: EXECUTION_ERROR)"
        )
        assert env.state().episode_id is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"blanks": 0}, "blanks must be from 1 to 64, got 0"),
        ({"blanks": "many"}, "blanks must be an integer from 1 to 64, got 'many'"),
        ({"seed": "x"}, "seed must be an integer, got 'x'"),
    ],
)
def test_bad_reset_over_the_wire(sudoku_url: str, options: dict[str, Any], message: str) -> None:
    with open_sudoku_env(sudoku_url) as env:
        refused = server_error(lambda: env.reset(**options))
        assert refused == f"Server error: {message} (code: EXECUTION_ERROR)"


def test_capacity_reached() -> None:
    with two_session_server("envs.sudoku.server") as url:
        with open_sudoku_env(url) as a, open_sudoku_env(url) as b:
            a.reset(seed=1)
            b.reset(seed=2)
            assert_session_refused(open_sudoku_env(url))
            step = a.step(SudokuAction(row=1, column=1, digit=1))
            assert step.observation.metadata["step_count"] == 1


def test_openenv_validate(sudoku_url: str, tmp_path: Path) -> None:
    assert_openenv_validate_passes(sudoku_url, tmp_path)
