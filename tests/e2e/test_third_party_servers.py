"""Training, evaluating and dry-running on OpenEnv servers nobody here wrote (tests/support/
option_servers.py: a classic one and an MCP one, real uvicorn processes, no envlab marker; and tests/support/
penalty_echo.py, the echo server with -1 for every step),
through the API and a real Celery worker: every reset option reaches the server, and a server
whose every step costs -1 gives negative rewards everywhere, re-scoring included."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.test import Client

from tests.e2e.helpers import wait_for, wait_status
from tests.envs.servers import run_env_server
from webapp.evaluations.models import EvaluationEpisode
from webapp.jobs.models import Job
from webapp.runs.models import MetricPoint, Rollout

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false"}
# Not the servers' defaults (topic "legs", size 10, step reward 0, two steps an episode).
OPTIONS = {"topic": "arithmetic", "size": 20, "step_reward": -1.0, "max_steps": 1}
ENV_REWARD = [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}]


@pytest.fixture(scope="module")
def classic_url() -> Iterator[str]:
    with run_env_server("tests.support.option_servers:classic_app", SERVER_ENV) as url:
        yield url


@pytest.fixture(scope="module")
def penalty_url() -> Iterator[str]:
    with run_env_server("tests.support.penalty_echo:app", {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "16"}) as url:
        yield url


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    with run_env_server("tests.support.option_servers:mcp_app", SERVER_ENV) as url:
        yield url


def _register(api, name: str, url: str, style: str = "generated") -> int:
    response = api.post("/api/environments/", {"name": name, "base_url": url, "capacity": 16}, format="json")
    assert response.status_code == 201, response.json()
    chosen = response.json()["metadata"]["style"]
    assert chosen == style if style == "bundled" else chosen in ("classic", "mcp")
    return int(response.json()["id"])


def _job(api, response, worker) -> dict:
    assert response.status_code == 202, response.json()
    job_id = response.json()["id"]
    try:
        wait_for(lambda: Job.objects.get(pk=job_id).status in ("succeeded", "failed"), 180, f"job {job_id}")
    except AssertionError:
        raise AssertionError(worker.log_text()[-6000:]) from None
    shown = api.get(f"/api/jobs/{job_id}/").json()
    assert (shown["status"], shown["error"]) == ("succeeded", ""), shown
    return shown["result"]


def _train(api, env_id: int, name: str, reset: dict, worker) -> list[Rollout]:
    config = {
        "name": name,
        "model": "demo:echo",
        "environments": [{"environment": env_id, "name": name, "prompt": "Echo 'hello'.", "rows": 8,
                          "reset": reset}],
        "rewards": ENV_REWARD,
        "grpo": {"num_generations": 4, "max_steps": 2, "per_device_train_batch_size": 4,
                 "max_completion_length": 48, "max_tool_calling_iterations": 2, "learning_rate": 5e-5},
    }
    response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    run = wait_status(response.json()["id"], ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error) == ("succeeded", "")
    rollouts = list(Rollout.objects.filter(run_id=run.pk).order_by("seq"))
    assert len(rollouts) == 8
    return rollouts


def test_a_runs_reset_options_reach_a_classic_server(api, owner, classic_url, worker):
    env_id = _register(api, "quiz", classic_url)
    rollouts = _train(api, env_id, "quiz", OPTIONS, worker)
    # The first observation, appended to the prompt TRL trained on, is the one the options chose.
    for rollout in rollouts:
        (message,) = rollout.prompt
        assert message["role"] == "user" and message["content"].startswith("Echo 'hello'.\nquestion: ")
        assert re.fullmatch(r"Echo 'hello'\.\nquestion: arithmetic question \d+ of 20", message["content"])
    assert len({r.prompt[0]["content"] for r in rollouts}) > 1  # the rows' seeds reached it too
    browser = Client()
    browser.force_login(owner)
    page = browser.get(f"/runs/{rollouts[0].run_id}/")
    assert page.status_code == 200
    assert b'data-episode-reward="sum"' in page.content
    assert b"<code>topic=arithmetic</code>" in page.content


def test_a_run_on_a_server_that_charges_every_step_scores_below_zero(api, penalty_url, worker):
    env_id = _register(api, "penalty", penalty_url, style="bundled")
    rollouts = _train(api, env_id, "penalty", {}, worker)
    called = [r for r in rollouts if r.episode["attributes"]["steps"] > 0]
    assert called, f"the demo model called echo in no episode: {rollouts[0].messages}"
    for rollout in rollouts:
        expected = -1.0 if rollout in called else 0.0  # no step, no reward
        assert (rollout.rewards, rollout.reward) == ({"env_reward": expected}, expected)
    run_id = rollouts[0].run_id
    curve = list(MetricPoint.objects.filter(run_id=run_id, key="reward").order_by("step").values_list("value", flat=True))
    assert len(curve) == 2 and all(value <= 0 for value in curve) and min(curve) < 0, curve

    # Re-scoring with the same term reproduces the stored totals, below zero.
    recipe = api.post("/api/reward-recipes/", {"name": "env", "terms": ENV_REWARD}, format="json").json()["id"]
    result = _job(api, api.post(f"/api/runs/{run_id}/rescore/", {"recipe": recipe}, format="json"), worker)
    assert result["rescored"] == 8
    mean = sum(r.reward for r in rollouts) / 8
    assert mean < 0
    assert result["old"]["total"]["mean"] == pytest.approx(mean, abs=1e-9)
    assert result["new"]["total"]["mean"] == pytest.approx(mean, abs=1e-9)


def test_an_evaluation_and_a_dry_run_send_their_reset_options(api, classic_url, mcp_url, worker):
    mcp_id = _register(api, "quiz-mcp", mcp_url)
    response = api.post("/api/evaluations/", {
        "environment": mcp_id, "models": ["random"], "episodes": 3, "seed": 5,
        "prompt": "Answer the question.", "reset": OPTIONS, "max_tool_calling_iterations": 4,
    }, format="json")
    assert response.status_code == 201, response.json()
    evaluation_id = response.json()["id"]

    def finished() -> dict | None:
        shown = api.get(f"/api/evaluations/{evaluation_id}/").json()
        return shown if shown["status"] in ("succeeded", "failed") else None

    try:
        shown = wait_for(finished, 180, f"evaluation {evaluation_id}")
    except AssertionError:
        raise AssertionError(worker.log_text()[-6000:]) from None
    assert (shown["status"], shown["error"]) == ("succeeded", ""), shown
    # The random policy's first call ends each episode at -1: the options' max_steps and reward.
    assert shown["results"][0]["mean_reward"] == -1.0
    episodes = list(EvaluationEpisode.objects.filter(evaluation_id=evaluation_id))
    assert len(episodes) == 3
    for episode in episodes:
        assert "question: arithmetic question" in str(episode.messages) and "of 20" in str(episode.messages)

    classic_id = _register(api, "quiz", classic_url)
    recipe = api.post("/api/reward-recipes/", {"name": "env", "terms": ENV_REWARD}, format="json").json()["id"]
    report = _job(api, api.post(f"/api/reward-recipes/{recipe}/dry-run/", {
        "environment": classic_id, "policy": "random", "groups": 2, "group_size": 2, "seed": 3,
        "prompt": "Answer the question.", "reset": OPTIONS,
    }, format="json"), worker)
    assert report["total"] == {**report["total"], "count": 4, "mean": -1.0, "min": -1.0, "max": -1.0}
