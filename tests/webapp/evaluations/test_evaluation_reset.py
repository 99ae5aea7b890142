"""An evaluation's `reset` arguments (a Catch grid, a Sudoku's blanks): validated like a run
environment's, stored with the evaluation, and in every row the worker plays; a checkpoint
evaluation takes the run's own. The environment is the real echo server (uvicorn); nothing
here reaches a worker (no commit, so no task is sent)."""

from __future__ import annotations

import pytest

from tests.support.trained_runs import two_step_run_with_checkpoint
from webapp.evaluations.models import Evaluation
from worker.play.evaluation import evaluation_rows

pytestmark = pytest.mark.django_db


def test_reset_arguments_reach_every_row(api, echo_id):
    response = api.post(
        "/api/evaluations/",
        {"environment": echo_id, "models": ["solver"], "episodes": 3, "seed": 5,
         "reset": {"rows": 4, "columns": 3}},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.json()
    assert response.json()["settings"]["reset"] == {"rows": 4, "columns": 3}
    evaluation = Evaluation.objects.get(pk=response.json()["id"])
    rows = evaluation_rows(evaluation)
    assert [(row["rows"], row["columns"]) for row in rows] == [(4, 3)] * 3
    # The same seeds as without reset arguments: the grid changes, not the episodes.
    plain = api.post(
        "/api/evaluations/",
        {"environment": echo_id, "models": ["solver"], "episodes": 3, "seed": 5},
        format="json",
    )
    assert "reset" not in plain.json()["settings"]
    plain_rows = evaluation_rows(Evaluation.objects.get(pk=plain.json()["id"]))
    assert [row["seed"] for row in plain_rows] == [row["seed"] for row in rows]
    assert "rows" not in plain_rows[0]


@pytest.mark.parametrize(
    ("reset", "message"),
    [
        ({"seed": 1}, "reset argument 'seed' is set by envlab itself"),
        ({"Rows": 4}, "reset argument 'Rows' must be a lowercase identifier"),
    ],
)
def test_bad_reset_arguments_are_refused_and_write_nothing(api, echo_id, reset, message):
    response = api.post(
        "/api/evaluations/",
        {"environment": echo_id, "models": ["solver"], "reset": reset},
        format="json",
    )
    assert (response.status_code, response.json()) == (400, {"reset": [message]})
    assert not Evaluation.objects.exists()


def test_checkpoint_evaluations_play_the_grid_the_run_trained_on(api, owner, echo_id, settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    run = two_step_run_with_checkpoint(
        owner, settings, "catch-like",
        {"environment": echo_id, "name": "echo", "prompt": "Echo 'a'.", "rows": 8, "reset": {"rows": 5, "columns": 3}},
        grpo={"num_generations": 2, "max_steps": 2, "per_device_train_batch_size": 2},
    )
    response = api.post(f"/api/runs/{run.pk}/evaluate-checkpoints/", {"episodes": 2}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["settings"]["reset"] == {"rows": 5, "columns": 3}
