"""The evaluation player in this process, against the real echo server (uvicorn) and the
test variant of the demo model: policies, greedy models, the lease and the table."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.e2e.helpers import register_echo
from tests.support.demo_models import built_demo_echo
from tests.support.trained_runs import trained_echo_run
from webapp.evaluations.models import Evaluation, EvaluationEpisode
from webapp.evaluations.selectors import evaluation_results
from webapp.evaluations.services import evaluation_claim, evaluation_create

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_heartbeat_inside_a_test_transaction(request, settings):
    """The player's heartbeat thread renews the lease on a connection of its own, which cannot
    see the rows a non-transactional test has not committed: its first beat (1 s in the test
    settings) would call the lease lost in any evaluation that plays longer (on PostgreSQL; a
    cold process loads torch and the model for longer than that). Those tests are about play,
    so their heartbeat waits out the test; the lease is the transactional tests' subject."""
    if not request.node.get_closest_marker("django_db").kwargs.get("transaction"):
        settings.ENVLAB_HEARTBEAT_SECONDS = 3600.0


@pytest.fixture(scope="module")
def demo_echo() -> str:
    return built_demo_echo()


def _registered(api, name: str, url: str) -> int:
    """The server at ``url`` registered through the API as the client's user's ``name``; its id."""
    response = api.post("/api/environments/", {"name": name, "base_url": url, "capacity": 8}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def _play(evaluation: Evaluation) -> str:
    from worker.play.evaluation import evaluate

    claim = evaluation_claim(evaluation_id=evaluation.pk, lease_owner="lease-a", worker_name="test")
    assert claim.outcome == "claimed"
    return evaluate(evaluation_id=evaluation.pk, lease_owner="lease-a")


def test_solver_random_and_model_play_the_same_rows(api, owner, echo_url, demo_echo):
    env_id = register_echo(api, echo_url)
    evaluation = evaluation_create(
        owner=owner,
        data={
            "environment": env_id,
            "models": ["solver", "random", demo_echo],
            "episodes": 3,
            "seed": 5,
            "max_completion_length": 64,
            "max_tool_calling_iterations": 2,
        },
    )
    assert _play(evaluation) == "succeeded"
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.done, evaluation.total, evaluation.lease_owner) == (
        "succeeded",
        9,
        9,
        "",
    )
    episodes = list(EvaluationEpisode.objects.filter(evaluation=evaluation))
    seeds = {m: [e.seed for e in episodes if e.model_index == m] for m in range(3)}
    assert seeds[0] == seeds[1] == seeds[2] and len(set(seeds[0])) == 3
    solver = [e for e in episodes if e.model_index == 0]
    assert [(e.reward, e.won, e.tool_calls, e.tool_failures) for e in solver] == [
        (1.0, True, 1, 0)
    ] * 3
    model = [e for e in episodes if e.model_index == 2]
    # The transcript is TRL's: the prompt, then the parsed call and the tool's answer.
    first = model[0].messages
    assert first[0]["role"] == "user" and first[0]["content"].startswith("Echo '")
    assert first[1]["tool_calls"][0]["function"]["name"] == "echo"
    assert first[2]["role"] == "tool" and first[2]["name"] == "echo"
    assert all(e.tool_calls >= 1 for e in model)
    rows = evaluation_results(evaluation=evaluation)
    assert [r["model"] for r in rows] == ["solver", "random", "demo:echo"]
    assert rows[0] == {
        "model": "solver",
        "episodes": 3,
        "mean_reward": 1.0,
        "wins": 3,
        "tool_calls": 3,
        "tool_failures": 0,
    }


@pytest.fixture(scope="module")
def catch_url():
    from tests.envs.servers import run_env_server

    with run_env_server("envs.catch.server:app", {"ENABLE_WEB_INTERFACE": "false"}) as url:
        yield url


def test_catch_table_has_its_columns_from_the_episode_attributes(api, owner, catch_url):
    evaluation = evaluation_create(
        owner=owner,
        data={
            "environment": _registered(api, "my-catch", catch_url),
            "models": ["solver", "random"],
            "episodes": 4,
            "seed": 1,
        },
    )
    assert evaluation.environment_key == "catch"
    assert _play(evaluation) == "succeeded"
    rows = evaluation_results(evaluation=evaluation)
    stored = list(EvaluationEpisode.objects.filter(evaluation=evaluation))
    assert rows[0]["model"] == "solver" and rows[0]["episodes"] == 4
    assert (rows[0]["wins"], rows[0]["catches"], rows[0]["mean_reward"]) == (4, 4, 1.0)
    for index, row in enumerate(rows):
        played = [e for e in stored if e.model_index == index]
        assert row["catches"] == sum(int(e.attributes["catches"]) for e in played)
        assert row["wins"] == sum(e.won for e in played)
        assert row["mean_reward"] == sum(e.reward for e in played) / 4
    assert set(rows[1]) == {
        "model",
        "episodes",
        "mean_reward",
        "wins",
        "tool_calls",
        "tool_failures",
        "catches",
    }


# Committed rows: the player's heartbeat thread renews the lease on a connection of its own,
# which would not see an uncommitted evaluation and would call the lease lost.
@pytest.mark.django_db(transaction=True)
def test_a_stale_lease_is_taken_over_and_stored_episodes_are_kept(api, owner, echo_url, frozen_workers):
    # The claims here are the test's own: a live worker of the session (from earlier end-to-end
    # tests) would claim the queued evaluation first, so it is frozen for this test.
    from django.utils import timezone

    from webapp.evaluations.services import evaluation_mark_stale_failed, evaluation_record_episode
    from worker.play.evaluation import evaluate

    env_id = register_echo(api, echo_url)
    evaluation = evaluation_create(
        owner=owner, data={"environment": env_id, "models": ["solver"], "episodes": 3}
    )
    assert (
        evaluation_claim(evaluation_id=evaluation.pk, lease_owner="dead", worker_name="w1").outcome
        == "claimed"
    )
    kept = {
        "model_index": 0,
        "model": "solver",
        "index": 1,
        "seed": 42,
        "messages": [{"role": "user", "content": "x"}],
        "reward": 0.5,
        "won": False,
        "tool_calls": 1,
        "tool_failures": 0,
        "lost": False,
        "ended_by": "policy",
        "attributes": {},
    }
    assert evaluation_record_episode(evaluation_id=evaluation.pk, lease_owner="dead", episode=kept)
    # Alive: another worker may not take it.
    assert (
        evaluation_claim(evaluation_id=evaluation.pk, lease_owner="b", worker_name="w2").outcome
        == "busy"
    )
    Evaluation.objects.filter(pk=evaluation.pk).update(
        heartbeat_at=timezone.now() - timezone.timedelta(seconds=settings.ENVLAB_STALE_SECONDS + 1)
    )
    assert evaluation_mark_stale_failed() == 0  # not yet: a takeover gets the first chance
    assert (
        evaluation_claim(evaluation_id=evaluation.pk, lease_owner="b", worker_name="w2").outcome
        == "claimed"
    )
    # The dead worker's writes are refused from now on.
    assert not evaluation_record_episode(
        evaluation_id=evaluation.pk, lease_owner="dead", episode={**kept, "index": 0}
    )
    assert evaluate(evaluation_id=evaluation.pk, lease_owner="b") == "succeeded"
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.done, evaluation.attempts) == ("succeeded", 3, 2)
    episodes = list(
        EvaluationEpisode.objects.filter(evaluation=evaluation).values_list(
            "index", "reward", "seed"
        )
    )
    assert [(i, r) for i, r, _ in episodes] == [(0, 1.0), (1, 0.5), (2, 1.0)]
    assert episodes[1][2] == 42
    # Done: another copy of the message has nothing to do.
    assert (
        evaluation_claim(evaluation_id=evaluation.pk, lease_owner="c", worker_name="w3").outcome
        == "done"
    )


def test_an_abandoned_evaluation_fails_instead_of_running_forever(api, owner, echo_url):
    from django.utils import timezone

    from webapp.evaluations.services import evaluation_mark_stale_failed

    env_id = register_echo(api, echo_url)
    evaluation = evaluation_create(
        owner=owner, data={"environment": env_id, "models": ["solver"], "episodes": 1}
    )
    evaluation_claim(evaluation_id=evaluation.pk, lease_owner="dead", worker_name="w1")
    Evaluation.objects.filter(pk=evaluation.pk).update(
        heartbeat_at=timezone.now()
        - timezone.timedelta(seconds=settings.ENVLAB_INTERRUPT_SECONDS + 1)
    )
    # Reads never write: the API shows it running until beat's sweep (worker.tasks.sweep_stale_runs).
    assert api.get(f"/api/evaluations/{evaluation.pk}/").json()["status"] == "running"
    assert evaluation_mark_stale_failed() == 1
    assert api.get(f"/api/evaluations/{evaluation.pk}/").json()["status"] == "failed"
    evaluation.refresh_from_db()
    assert (evaluation.lease_owner, evaluation.error) == (
        "",
        "The worker stopped sending heartbeats; start the evaluation again.",
    )
    assert evaluation_mark_stale_failed() == 0


def test_checkpoints_of_a_run_are_plotted_with_the_best_marked(
    api, owner, echo_url, demo_echo, tmp_path
):
    import shutil

    from webapp.evaluations.selectors import evaluation_checkpoint_series
    from webapp.evaluations.services import evaluation_create_for_checkpoints

    env_id = register_echo(api, echo_url)
    run = trained_echo_run(owner, env_id, 4)
    # Checkpoints made by copying the built demo model (no training here: the trainer's own
    # checkpoints are covered by the training tests); each is a real, loadable model folder.
    # RUNS_DIR outlives a test session and run pks repeat: start from an empty run folder,
    # or a checkpoint a previous session left under the same pk joins the series.
    shutil.rmtree(settings.RUNS_DIR / str(run.pk), ignore_errors=True)
    for step in (2, 4):
        folder = settings.RUNS_DIR / str(run.pk) / f"checkpoint-{step}"
        shutil.copytree(settings.MODELS_DIR / "echo", folder)
        (folder / "trainer_state.json").write_text("{}")
    evaluation = evaluation_create_for_checkpoints(owner=owner, run=run, episodes=2, seed=4)
    assert _play(evaluation) == "succeeded"
    series = evaluation_checkpoint_series(evaluation=evaluation)
    rows = evaluation_results(evaluation=evaluation)
    assert series["steps"] == [2, 4]
    assert series["mean_reward"] == [rows[0]["mean_reward"], rows[1]["mean_reward"]]
    # The same weights at both steps: the same numbers, and the earlier step wins the tie.
    assert rows[0]["mean_reward"] == rows[1]["mean_reward"]
    assert series["best"] == {
        "step": 2,
        "mean_reward": rows[0]["mean_reward"],
        "model": f"run:{run.pk}@2",
    }
    page = api.get(f"/api/evaluations/{evaluation.pk}/").json()
    assert page["checkpoints"] == series
    shutil.rmtree(settings.RUNS_DIR / str(run.pk))


@pytest.mark.parametrize(
    ("app", "key", "columns", "iterations"),
    [
        ("envs.wordle.server:app", "wordle", {"guesses_per_win", "best_greens", "invalid_guesses"}, 16),
        # 20 blanks (the default puzzle) take 20 placements, one call each.
        ("envs.sudoku.server:app", "sudoku", {"solved", "cells_correct"}, 20),
    ],
)
def test_wordle_and_sudoku_columns_from_the_episode_attributes(api, owner, app, key, columns, iterations):
    from tests.envs.servers import run_env_server

    with run_env_server(app, {"ENABLE_WEB_INTERFACE": "false"}) as url:
        evaluation = evaluation_create(
            owner=owner,
            data={
                "environment": _registered(api, f"my-{key}", url),
                "models": ["solver", "random"],
                "episodes": 2,
                "max_tool_calling_iterations": iterations,
            },
        )
        assert evaluation.environment_key == key
        assert _play(evaluation) == "succeeded"
    rows = evaluation_results(evaluation=evaluation)
    assert (
        set(rows[0]) - {"model", "episodes", "mean_reward", "wins", "tool_calls", "tool_failures"}
        == columns
    )
    solved = [
        e for e in EvaluationEpisode.objects.filter(evaluation=evaluation) if e.model_index == 0
    ]
    assert rows[0]["wins"] == 2
    if key == "wordle":
        assert rows[0]["guesses_per_win"] == sum(e.attributes["num_guesses"] for e in solved) / 2
        # The solver always finds the word: its best guess is all green.
        assert rows[0]["best_greens"] == 5.0
        assert rows[0]["invalid_guesses"] == sum(
            int(e.attributes.get("invalid_moves", 0)) for e in solved
        )
    else:
        assert rows[0]["solved"] == 2
        assert rows[0]["cells_correct"] == sum(e.attributes["blanks"] for e in solved) / 2


def test_reference_policies_make_at_most_the_evaluations_tool_calling_iterations(api, owner):
    """The solver and the random policy play by the model's rule: one call a round, at most
    max_tool_calling_iterations rounds (16 unless stated). Sudoku's default puzzle needs 20."""
    from tests.envs.servers import run_env_server

    with run_env_server("envs.sudoku.server:app", {"ENABLE_WEB_INTERFACE": "false"}) as url:
        environment = _registered(api, "my-sudoku", url)
        default = evaluation_create(
            owner=owner, data={"environment": environment, "models": ["solver", "random"], "episodes": 2}
        )
        three = evaluation_create(
            owner=owner,
            data={"environment": environment, "models": ["solver", "random"], "episodes": 2,
                  "max_tool_calling_iterations": 3},
        )
        room = evaluation_create(
            owner=owner,
            data={"environment": environment, "models": ["solver"], "episodes": 2, "max_tool_calling_iterations": 20},
        )
        assert [_play(evaluation) for evaluation in (default, three, room)] == ["succeeded"] * 3

    def played(evaluation):
        return [
            (e.model_index, e.tool_calls, e.ended_by, e.won, e.messages[-1]["role"])
            for e in EvaluationEpisode.objects.filter(evaluation=evaluation).order_by("model_index", "index")
        ]

    assert played(default) == [(0, 16, "limit", False, "tool")] * 2 + [(1, 16, "limit", False, "tool")] * 2
    assert played(three) == [(0, 3, "limit", False, "tool")] * 2 + [(1, 3, "limit", False, "tool")] * 2
    assert played(room) == [(0, 20, "environment", True, "assistant")] * 2
    assert [len([m for m in e.messages if m.get("tool_calls")]) for e in EvaluationEpisode.objects.filter(
        evaluation=three
    )] == [3, 3, 3, 3]
    assert evaluation_results(evaluation=three)[0]["tool_calls"] == 6


def test_model_policy_continues_as_trl_does(demo_echo):
    """The policy's first call is what TRL's parser reads from the same greedy completion, and
    its tool-result suffix is TRL 1.16's own `_get_tool_suffix_ids` (called unbound on a
    stand-in for the trainer: building a GRPOTrainer needs a dataset and a reward here)."""
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer
    from trl.chat_template_utils import parse_response

    from envs.adapters.echo import EchoAdapter
    from worker.play.evaluation_policy import ModelPolicy, prepare_tokenizer, training_chat_template

    path = settings.MODELS_DIR / "echo"
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(path))
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    tools = [EchoAdapter.echo]
    policy = ModelPolicy(
        model=model,
        tokenizer=tokenizer,
        tools=tools,
        max_completion_length=64,
        max_tool_calling_iterations=2,
        chat_template_kwargs={"enable_thinking": False},
        chat_template=training_chat_template(tokenizer),
    )
    prompt = "Echo 'red fox'."
    policy.start(prompt, {"prompt": [{"role": "user", "content": prompt}]})
    call = policy.next_call(None)
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}],
        tools=tools,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        enable_thinking=False,
    )["input_ids"]
    completion = policy._completion_ids
    expected = parse_response(tokenizer, completion, prefix=list(ids), tools=tools)["tool_calls"][
        0
    ]["function"]
    assert call is not None and (call.name, call.arguments) == (
        expected["name"],
        expected["arguments"],
    )
    assert policy._prompt_ids == list(ids)

    messages = [{"role": "tool", "name": "echo", "content": "red fox"}]
    trainer = SimpleNamespace(
        processing_class=tokenizer,
        _tokenizer=tokenizer,
        chat_template=policy.chat_template,
        chat_template_kwargs={"enable_thinking": False},
        _is_vlm=False,
    )
    assert policy._tool_suffix_ids(messages) == GRPOTrainer._get_tool_suffix_ids(trainer, messages)
