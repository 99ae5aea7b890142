"""GRPO on every bundled environment, and on two at once: real environment servers, a real
Celery worker training the demo model with TRL, real Redis. The demo model only learned
to call `echo`, so on the games its calls mostly fail: what is checked here is the path
(tools offered, episodes reset, rewards computed per term and stored), not learning.

Slow (most of a minute of training on four servers): `make test` runs it on one database only."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import metric_steps, wait_status
from tests.envs.servers import run_env_server
from webapp.runs.models import MetricPoint, Rollout, RunEvent

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "MAX_CONCURRENT_ENVS": "16"}
PROMPTS = {
    "wordle": "Play Wordle with the guess tool.",
    "catch": "Catch the ball: use move or stay.",
    "sudoku": "Fill the sudoku with the place tool.",
}


@pytest.fixture(scope="module")
def game_urls():
    with (
        run_env_server("envs.wordle.server:app", SERVER_ENV) as wordle,
        run_env_server("envs.catch.server:app", SERVER_ENV) as catch,
        run_env_server("envs.sudoku.server:app", SERVER_ENV) as sudoku,
    ):
        yield {"wordle": wordle, "catch": catch, "sudoku": sudoku}


def _register(api, name: str, url: str, **extra) -> int:
    # The catalog entry is `my-<name>`: the bundled servers' names are reserved
    # (webapp.catalog.names); runs name their environments themselves.
    response = api.post("/api/environments/", {"name": f"my-{name}", "base_url": url, **extra}, format="json")
    assert response.status_code == 201, response.json()
    return int(response.json()["id"])


def _launch(api, environments: list[dict], rewards: list[dict], max_steps: int = 2) -> int:
    config = {
        "name": "games",
        "model": "demo:echo",
        "environments": environments,
        "rewards": rewards,
        "grpo": {
            "num_generations": 4, "max_steps": max_steps, "per_device_train_batch_size": 4,
            "max_completion_length": 40, "max_tool_calling_iterations": 2, "save_steps": 50,
        },
    }
    response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    return int(response.json()["id"])


@pytest.mark.parametrize("game", ["wordle", "catch", "sudoku"])
def test_short_run_on_each_game(api, game_urls, worker, game):
    env_id = _register(api, game, game_urls[game])
    reset = {"blanks": 4} if game == "sudoku" else {}
    run_id = _launch(
        api,
        [{"environment": env_id, "name": game, "prompt": PROMPTS[game], "rows": 8, "reset": reset}],
        [{"name": "outcome", "kind": "env_reward"}, {"name": "tool_called", "kind": "tool_called", "weight": 0.1}],
    )
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error, run.step) == ("succeeded", "", 2)
    rollouts = list(Rollout.objects.filter(run_id=run_id))
    seen = [(r.step, r.rewards, r.unscored) for r in rollouts]
    events = list(RunEvent.objects.filter(run_id=run_id).values_list("kind", "message", "data"))
    for key in ("rewards/outcome/mean", "rewards/tool_called/mean", "tools/call_frequency", "reward"):
        assert metric_steps(run_id, key) == [1, 2], (key, seen, events)
    assert len(rollouts) == 8 and {r.env for r in rollouts} == {game}
    # reset's text (the board or the rules) reached the prompt the model saw
    assert all(len(r.prompt[-1]["content"]) > len(PROMPTS[game]) for r in rollouts)


def test_multi_environment_run_routes_rewards(api, game_urls, worker):
    wordle = _register(api, "wordle", game_urls["wordle"])
    catch = _register(api, "catch", game_urls["catch"])
    run_id = _launch(
        api,
        [
            {"environment": wordle, "name": "wordle", "prompt": PROMPTS["wordle"], "rows": 8},
            {"environment": catch, "name": "catch", "prompt": PROMPTS["catch"], "rows": 8},
        ],
        [
            {"name": "wordle_win", "kind": "env_reward", "environments": ["wordle"]},
            {"name": "catch_outcome", "kind": "env_reward", "environments": ["catch"]},
        ],
        max_steps=3,
    )
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error) == ("succeeded", "")
    rollouts = list(Rollout.objects.filter(run_id=run_id))
    assert {r.env for r in rollouts} == {"wordle", "catch"}  # 12 rollouts from 16 shuffled rows
    for rollout in rollouts:
        other = "catch_outcome" if rollout.env == "wordle" else "wordle_win"
        own = "wordle_win" if rollout.env == "wordle" else "catch_outcome"
        assert rollout.rewards[other] is None
        assert isinstance(rollout.rewards[own], float)
    stored = set(MetricPoint.objects.filter(run_id=run_id, key__startswith="rewards/").values_list("key", flat=True))
    assert {"rewards/wordle_win/mean", "rewards/catch_outcome/mean"} <= stored


@pytest.fixture(scope="module")
def ors_url():
    import sys

    from tests.envs.servers import free_port, run_server_command

    port = free_port()
    command = [sys.executable, "-m", "envs.ors.server", "--host", "127.0.0.1", "--port", str(port)]
    with run_server_command(command, f"http://127.0.0.1:{port}", {"OPENREWARD_DISABLE_UPDATE_CHECK": "1"}) as url:
        yield url


def test_ors_registration_takes_every_environment_or_the_chosen_one_and_reads_splits(api, ors_url):
    response = api.post("/api/environments/", {"name": "all", "base_url": ors_url}, format="json")
    assert response.status_code == 201, response.json()
    assert [(e["name"], e["metadata"]["ors_env"]) for e in response.json()["registered"]] == [
        ("all-echo", "echo"), ("all-guessnumber", "guessnumber")
    ]
    body = api.post(
        "/api/environments/", {"name": "my-ors-echo", "base_url": ors_url, "ors_env": "echo"}, format="json"
    ).json()
    assert (body["kind"], body["metadata"]["ors_env"], body["metadata"]["splits"]) == (
        "ors", "echo", {"train": 32, "test": 8}
    )
    assert [t["name"] for t in body["tools"]] == ["echo"]


def test_ors_run_and_a_run_mixing_ors_with_openenv(api, ors_url, game_urls, worker):
    ors_echo = _register(api, "ors-echo", ors_url, ors_env="echo")
    run_id = _launch(
        api,
        [{"environment": ors_echo, "name": "ors_echo", "num_tasks": 8}],
        [{"name": "outcome", "kind": "env_reward"}],
    )
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error, run.step) == ("succeeded", "", 2)
    assert metric_steps(run_id, "rewards/outcome/mean") == [1, 2]
    assert {r.env for r in Rollout.objects.filter(run_id=run_id)} == {"ors_echo"}

    catch = _register(api, "catch", game_urls["catch"])
    run_id = _launch(
        api,
        [
            {"environment": ors_echo, "name": "ors_echo", "num_tasks": 8},
            {"environment": catch, "name": "catch", "prompt": PROMPTS["catch"], "rows": 8},
        ],
        [
            {"name": "echo_score", "kind": "env_reward", "environments": ["ors_echo"]},
            {"name": "catch_outcome", "kind": "env_reward", "environments": ["catch"]},
        ],
        max_steps=3,
    )
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error) == ("succeeded", "")
    rollouts = list(Rollout.objects.filter(run_id=run_id))
    assert {r.env for r in rollouts} == {"ors_echo", "catch"}
    for rollout in rollouts:
        other = "catch_outcome" if rollout.env == "ors_echo" else "echo_score"
        assert rollout.rewards[other] is None


def test_run_on_an_mcp_server_through_the_generated_adapter(api, worker):
    with run_env_server("envs.mcpdemo.server:app", SERVER_ENV) as url:
        env_id = _register(api, "mcpdemo", url)
        run_id = _launch(
            api,
            [{"environment": env_id, "name": "shop", "prompt": "Add items until the total is right.", "rows": 8}],
            [{"name": "outcome", "kind": "env_reward"}, {"name": "tool_called", "kind": "tool_called"}],
        )
        run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error, run.step) == ("succeeded", "", 2)
    assert metric_steps(run_id, "rewards/outcome/mean") == [1, 2]
    assert {r.env for r in Rollout.objects.filter(run_id=run_id)} == {"shop"}
