"""Evaluations over the API: every rejected request is a 400 naming the field and writes
nothing; owner, operator and outsider see what they should. Environments are the real echo
server (uvicorn); nothing here reaches a worker (no commit in these tests, so no task is sent)."""

from __future__ import annotations

import json

import pytest

from tests.factories import EnvironmentFactory
from tests.fixtures.accounts import grant
from tests.support.trained_runs import trained_echo_run
from webapp.evaluations.models import Evaluation, EvaluationEpisode
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def built_model(settings, tmp_path):
    """A folder that looks like a saved model (config.json): the check is for presence."""
    settings.MODELS_DIR = tmp_path / "models"
    (tmp_path / "models" / "echo").mkdir(parents=True)
    (tmp_path / "models" / "echo" / "config.json").write_text("{}")
    return "demo:echo"


def _run_with_checkpoints(owner, env_id: int, runs_dir, steps=(2, 4)) -> Run:
    run = trained_echo_run(owner, env_id, max(steps) if steps else None)
    for step in steps:
        folder = runs_dir / str(run.pk) / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text("{}")
        (folder / "config.json").write_text("{}")
    return run


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        ({"episodes": 0}, "episodes", "greater than or equal to 1"),
        ({"episodes": 201}, "episodes", "less than or equal to 200"),
        ({"models": []}, "models", "at least 1 item"),
        ({"models": ["demo:nope"]}, "models.0", "demo model 'demo:nope' is not built"),
        ({"models": ["/etc"]}, "models.0", "local model folders must be under"),
        ({"models": [{"run": 999}]}, "models.0", "no run with id 999"),
        (
            {"models": [{"run": 1, "checkpoint": -1}]},
            "models.0.checkpoint",
            "a checkpoint is a step",
        ),
        ({"models": ["solver", "solver"]}, "models.1", "'solver' is listed twice (as model 0)"),
        ({"models": ["solver", "0" * 300]}, "models.1", "give a hub id 'org/name'"),
        ({"models": ["demo:Bad Name"]}, "models.0", "a demo model is 'demo:<name>'"),
        (
            {"models": ["a" * 90 + "/" + "b" * 90]},
            "models.0",
            "is not in the local hub cache and this machine is offline",
        ),
        ({"seed": -1}, "seed", "greater than or equal to 0"),
        (
            {"chat_template_kwargs": {"x": 1}},
            "chat_template_kwargs",
            "'x' is not a chat template switch",
        ),
        ({"extra": 1}, "extra", "Extra inputs are not permitted"),
    ],
)
def test_rejections_name_the_field_and_write_nothing(
    api, echo_id, built_model, change, field, fragment
):
    body = {
        "environment": echo_id,
        "models": ["solver", "demo:echo"],
        "episodes": 3,
        "seed": 1,
        **change,
    }
    response = api.post("/api/evaluations/", body, format="json")
    assert response.status_code == 400, response.json()
    assert list(response.json()) == [field]
    assert fragment in response.json()[field][0]
    assert Evaluation.objects.count() == 0


def test_another_users_private_environment_is_unknown(outsider_api, echo_id):
    response = outsider_api.post(
        "/api/evaluations/", {"environment": echo_id, "models": ["solver"]}, format="json"
    )
    assert (response.status_code, response.json()) == (
        400,
        {"environment": [f"no environment with id {echo_id}"]},
    )
    assert Evaluation.objects.count() == 0


def test_solver_only_where_one_exists(api, owner, echo_url):
    # An OpenEnv server registered by hand, not recognised as a bundled one: no solver, no default prompt.
    other = EnvironmentFactory(
        owner=owner,
        name="other",
        base_url=echo_url,
        metadata={"name": "other"},
        status="healthy",
        tools=[
            {
                "name": "echo",
                "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
            }
        ],
    )
    response = api.post(
        "/api/evaluations/",
        {"environment": other.pk, "models": ["solver", "random"]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "models.0": ["'other' has no solver (only the bundled echo, wordle, catch, sudoku do)"],
        "prompt": [
            "give the prompt of each episode (only the bundled environments have a default)"
        ],
    }
    assert Evaluation.objects.count() == 0


def test_an_accepted_request_queues_one_evaluation(api, owner, echo_id, built_model):
    body = {
        "environment": echo_id,
        "models": ["solver", "random", "demo:echo"],
        "episodes": 5,
        "seed": 3,
    }
    response = api.post("/api/evaluations/", body, format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    evaluation = Evaluation.objects.get()
    assert data["id"] == evaluation.pk
    assert (data["status"], data["progress"], data["environment"], data["environment_key"]) == (
        "queued",
        {"done": 0, "total": 15, "fraction": 0.0},
        echo_id,
        "echo",
    )
    assert data["prompt"] == "Echo '{phrase}'."
    assert [m["label"] for m in data["models"]] == ["solver", "random", "demo:echo"]
    assert [m["kind"] for m in data["models"]] == ["solver", "random", "model"]
    assert data["results"] == [
        {
            "model": label,
            "episodes": 0,
            "mean_reward": None,
            "wins": 0,
            "tool_calls": 0,
            "tool_failures": 0,
        }
        for label in ("solver", "random", "demo:echo")
    ]
    assert (evaluation.owner, evaluation.total, evaluation.episodes, evaluation.seed) == (
        owner,
        15,
        5,
        3,
    )


def test_results_are_computed_from_the_stored_episodes(api, owner, echo_id):
    evaluation = api.post(
        "/api/evaluations/",
        {"environment": echo_id, "models": ["solver", "random"], "episodes": 2},
        format="json",
    ).json()
    for model_index, rewards in ((0, (1.0, 1.0)), (1, (0.25, 0.0))):
        for index, reward in enumerate(rewards):
            EvaluationEpisode.objects.create(
                evaluation_id=evaluation["id"],
                model_index=model_index,
                model=["solver", "random"][model_index],
                index=index,
                seed=index,
                reward=reward,
                won=reward == 1.0,
                tool_calls=2,
                tool_failures=model_index,
            )
    data = api.get(f"/api/evaluations/{evaluation['id']}/").json()
    assert data["results"] == [
        {
            "model": "solver",
            "episodes": 2,
            "mean_reward": 1.0,
            "wins": 2,
            "tool_calls": 4,
            "tool_failures": 0,
        },
        {
            "model": "random",
            "episodes": 2,
            "mean_reward": 0.125,
            "wins": 0,
            "tool_calls": 4,
            "tool_failures": 2,
        },
    ]
    csv_text = api.get(f"/api/evaluations/{evaluation['id']}/results.csv").content.decode()
    assert csv_text.splitlines() == [
        "model,episodes,mean_reward,wins,tool_calls,tool_failures",
        "solver,2,1.0,2,4,0",
        "random,2,0.125,0,4,2",
    ]


def test_evaluations_are_private_to_their_owner(api, outsider_api, operator, echo_id):
    made = api.post(
        "/api/evaluations/", {"environment": echo_id, "models": ["solver"]}, format="json"
    ).json()
    pk = made["id"]
    for path in (
        f"/api/evaluations/{pk}/",
        f"/api/evaluations/{pk}/episodes/",
        f"/api/evaluations/{pk}/results.csv",
    ):
        assert outsider_api.get(path).status_code == 404, path
    assert outsider_api.post(f"/api/evaluations/{pk}/cancel/").status_code == 404
    assert outsider_api.get("/api/evaluations/").json() == []
    assert [e["id"] for e in api.get("/api/evaluations/").json()] == [pk]
    assert Evaluation.objects.get().status == "queued"

    from tests.fixtures.accounts import token_client

    viewer = token_client(grant(operator, "evaluations.view_evaluation"))
    assert viewer.get(f"/api/evaluations/{pk}/").status_code == 200
    refused = viewer.post(f"/api/evaluations/{pk}/cancel/")
    assert refused.status_code == 403
    assert Evaluation.objects.get().status == "queued"
    cancelled = api.post(f"/api/evaluations/{pk}/cancel/")
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "cancelled")
    assert api.post(f"/api/evaluations/{pk}/cancel/").status_code == 409


def test_evaluate_checkpoints_covers_every_checkpoint(
    api, owner, outsider_api, echo_id, settings, tmp_path
):
    settings.RUNS_DIR = tmp_path / "runs"
    run = _run_with_checkpoints(owner, echo_id, settings.RUNS_DIR)
    assert (
        outsider_api.post(
            f"/api/runs/{run.pk}/evaluate-checkpoints/", {}, format="json"
        ).status_code
        == 404
    )
    assert Evaluation.objects.count() == 0
    response = api.post(
        f"/api/runs/{run.pk}/evaluate-checkpoints/", {"episodes": 4, "seed": 2}, format="json"
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert [m["model"] for m in data["models"]] == [
        {"run": run.pk, "checkpoint": 2},
        {"run": run.pk, "checkpoint": 4},
    ]
    assert [m["label"] for m in data["models"]] == [f"run:{run.pk}@2", f"run:{run.pk}@4"]
    assert (data["source_run"], data["episodes"], data["seed"], data["prompt"]) == (
        run.pk,
        4,
        2,
        "Echo '{phrase}'.",
    )
    assert data["settings"] == {
        "max_completion_length": 48,
        "max_tool_calling_iterations": 2,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    assert data["checkpoints"] == {"run": run.pk, "steps": [], "mean_reward": [], "best": None}


def test_evaluate_checkpoints_of_a_run_without_any(api, owner, echo_id, settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    run = _run_with_checkpoints(owner, echo_id, settings.RUNS_DIR, steps=())
    run.checkpoint_step = None
    run.save()
    response = api.post(f"/api/runs/{run.pk}/evaluate-checkpoints/", {}, format="json")
    assert (response.status_code, response.json()) == (
        400,
        {"run": [f"run {run.pk} has no checkpoint yet"]},
    )
    assert Evaluation.objects.count() == 0


def test_anonymous_is_refused(client):
    assert client.get("/api/evaluations/").status_code in (401, 403)
    assert json.loads(client.post("/api/evaluations/", {}).content)


def test_evaluate_checkpoints_spreads_over_a_long_run(api, owner, echo_id, settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    run = _run_with_checkpoints(owner, echo_id, settings.RUNS_DIR, steps=tuple(range(5, 205, 5)))
    response = api.post(f"/api/runs/{run.pk}/evaluate-checkpoints/", {"episodes": 1}, format="json")
    assert response.status_code == 201, response.json()
    steps = [m["step"] for m in response.json()["models"]]
    assert len(steps) == 24 and steps[0] == 5 and steps[-1] == 200 and steps == sorted(set(steps))
