"""Same seed, same episode: a real Celery worker process plays evaluations of one chosen
episode seed (`episode_seeds`) against the real wordle and catch servers (uvicorn), the
solver in one evaluation and the random policy in another, and the solver once more; the
side by side of their episodes shows the same secret word, the same board and the same ball
column in every column and on every replay."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from envs.catch.server import new_game
from envs.wordle.rules import score_guess
from envs.wordle.server import secret_for_seed
from tests.e2e.helpers import register_lab_entry, wait_for
from tests.envs.servers import run_env_server
from tests.envs.wire import SERVER_ENV
from webapp.evaluations.arena.sidebyside import ColumnRef, side_by_side
from webapp.evaluations.models import EvaluationEpisode

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SEED = 1234
LETTERS = re.compile(r"^([A-Z](?: [A-Z]){4})\n([GYX](?: [GYX]){4})$", re.M)


@pytest.fixture(scope="module")
def game_urls() -> Iterator[dict[str, str]]:
    with (
        run_env_server("envs.wordle.server:app", SERVER_ENV) as wordle,
        run_env_server("envs.catch.server:app", SERVER_ENV) as catch,
    ):
        yield {"wordle": wordle, "catch": catch}


def _register(api: Any, name: str, url: str) -> int:
    return register_lab_entry(api, name, url, capacity=8)


def _played(api: Any, worker: Any, environment: int, model: str) -> int:
    response = api.post(
        "/api/evaluations/",
        {"environment": environment, "models": [model], "episode_seeds": [SEED], "max_tool_calling_iterations": 10},
        format="json",
    )
    assert response.status_code == 201, response.json()
    evaluation_id = int(response.json()["id"])

    def done() -> dict | None:
        body = api.get(f"/api/evaluations/{evaluation_id}/").json()
        return body if body["status"] not in ("queued", "running") else None

    try:
        body = wait_for(done, 180, f"evaluation {evaluation_id}")
    except AssertionError:
        raise AssertionError(worker.log_text()[-6000:]) from None
    assert (body["status"], body["error"], body["episodes"]) == ("succeeded", "", 1)
    return evaluation_id


def _columns(owner: Any, evaluations: list[int]) -> list[dict[str, Any]]:
    shown = side_by_side(user=owner, refs=[ColumnRef(e, 0, 0) for e in evaluations])
    assert shown.seed == SEED and not shown.pending and not shown.failed
    return shown.columns


def _start(column: dict[str, Any]) -> str:
    """The observation the episode starts from (appended to the prompt by reset)."""
    return column["replay"]["prompt"][-1]["content"]


def _tool_texts(column: dict[str, Any]) -> list[str]:
    return [str(m.get("content", "")) for m in column["replay"]["messages"] if m.get("role") == "tool"]


def test_the_same_wordle_seed_is_the_same_secret_word_in_every_column(api, owner, worker, game_urls):
    wordle = _register(api, "wordle", game_urls["wordle"])
    solver, random_policy, solver_again = (
        _played(api, worker, wordle, model) for model in ("solver", "random", "solver")
    )

    columns = _columns(owner, [solver, random_policy, solver_again])

    secret = secret_for_seed(SEED)
    assert [c["seed"] for c in columns] == [SEED] * 3
    assert len({_start(c) for c in columns}) == 1
    # The solver wins with the seed's secret word, the same on its replay, move for move.
    assert columns[0]["summary"]["won"] and columns[2]["summary"]["won"]
    assert columns[0]["replay"]["messages"] == columns[2]["replay"]["messages"]
    assert re.search(rf"The word was {secret.upper()}\.", _tool_texts(columns[0])[-1])
    # Every board row either column got was scored against that same word.
    boards = [LETTERS.findall("\n".join(_tool_texts(c))) for c in columns[:2]]
    assert boards[0]
    for rows in boards:
        for letters, marks in rows:
            guess = letters.replace(" ", "").lower()
            assert " ".join(score_guess(guess, secret)) == marks, (guess, marks)
    stored = EvaluationEpisode.objects.filter(evaluation_id__in=[solver, random_policy, solver_again])
    assert sorted(stored.values_list("seed", flat=True)) == [SEED] * 3


def test_the_same_catch_seed_drops_the_ball_in_the_same_column(api, owner, worker, game_urls):
    catch = _register(api, "catch", game_urls["catch"])
    evaluations = [_played(api, worker, catch, model) for model in ("solver", "random")]

    columns = _columns(owner, evaluations)

    starts = [_start(c) for c in columns]
    assert starts[0] == starts[1]
    top_row = next(line for line in starts[0].splitlines() if "o" in line.split())
    assert top_row.split().index("o") == new_game(SEED).ball_column
    assert columns[0]["summary"]["won"] is True
