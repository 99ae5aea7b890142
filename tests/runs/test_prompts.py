"""The prompt timeline's reads (webapp/runs/telemetry/prompts.py): a run's prompts with the steps each
was trained at, one prompt's groups at chosen steps, and the `steps=` parser. Rows go in
through the worker's write path (telemetry_record), so the prompt keys are the real ones."""

from __future__ import annotations

import math

import pytest

from tests.support.prompt_rows import (
    KEY_A,
    KEY_B,
    PROMPT_A,
    PROMPT_B,
    legacy_run,
    prompted_run,
    running_run,
)
from webapp.runs.models import Rollout, prompt_key
from webapp.runs.telemetry.prompts import (
    MAX_CHOSEN_STEPS,
    MAX_GROUP_ROLLOUTS,
    PromptStepsError,
    evenly_spaced,
    prompt_steps_parse,
    run_prompt_timeline,
    run_prompts,
)
from webapp.runs.telemetry.record import telemetry_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner):
    return prompted_run(owner)


def test_the_prompts_of_a_run_most_repeated_first(run):
    page = run_prompts(run=run)

    assert (page.count, page.untracked) == (2, 0)
    assert page.results == [
        {"prompt_key": KEY_A, "env": "echo", "seed": 11, "prompt": PROMPT_A, "steps": 2, "rollouts": 4,
         "first_step": 1, "last_step": 3, "reward_mean": pytest.approx(0.85)},
        {"prompt_key": KEY_B, "env": "echo", "seed": 22, "prompt": PROMPT_B, "steps": 1, "rollouts": 2,
         "first_step": 2, "last_step": 2, "reward_mean": pytest.approx(0.475)},
    ]


def test_the_prompts_sorted_and_paged(run):
    assert [r["prompt_key"] for r in run_prompts(run=run, order="fewest_steps").results] == [KEY_B, KEY_A]
    assert [r["prompt_key"] for r in run_prompts(run=run, order="first_step").results] == [KEY_A, KEY_B]
    second = run_prompts(run=run, offset=1, limit=1)
    assert (second.count, [r["prompt_key"] for r in second.results]) == (2, [KEY_B])
    assert run_prompts(run=run, offset=2, limit=1).results == []
    with pytest.raises(ValueError, match="order must be one of most_steps, fewest_steps, first_step"):
        run_prompts(run=run, order="reward")


def test_a_prompt_repeated_at_steps_1_and_3_shows_those_columns(run):
    timeline = run_prompt_timeline(run=run, key=KEY_A)

    assert timeline is not None
    assert {k: v for k, v in timeline.items() if k != "steps"} == {
        "prompt_key": KEY_A, "env": "echo", "seed": 11, "prompt": PROMPT_A,
        "trained_step_count": 2, "trained_steps": [1, 3], "default_steps": [1, 3], "chosen": False,
    }
    columns = timeline["steps"]
    assert [(c["step"], c["rollout_count"]) for c in columns] == [(1, 2), (3, 2)]
    assert [[r.seq for r in c["rollouts"]] for c in columns] == [[1, 2], [5, 6]]
    assert [[r.reward for r in c["rollouts"]] for c in columns] == [[0.1, 1.1], [1.1, 1.1]]
    assert columns[0]["reward_mean"] == pytest.approx(0.6)
    assert columns[0]["reward_std"] == pytest.approx(math.sqrt(0.5))  # sample deviation: n - 1
    assert (columns[1]["reward_mean"], columns[1]["reward_std"]) == (pytest.approx(1.1), 0.0)


def test_chosen_steps_include_one_the_prompt_was_not_trained_at(run):
    timeline = run_prompt_timeline(run=run, key=KEY_A, steps=[2, 3])

    assert timeline is not None and timeline["chosen"] is True
    assert [(c["step"], c["rollout_count"], c["reward_mean"], c["reward_std"], c["rollouts"])
            for c in timeline["steps"][:1]] == [(2, 0, None, None, [])]
    assert [r.seq for r in timeline["steps"][1]["rollouts"]] == [5, 6]
    assert timeline["default_steps"] == [1, 3]


def test_an_unknown_or_malformed_key_is_no_timeline(run, owner):
    other = prompted_run(owner, "other")
    assert run_prompt_timeline(run=run, key="0" * 32) is None
    assert run_prompt_timeline(run=run, key=KEY_A.upper()) is None
    assert run_prompt_timeline(run=run, key="") is None
    # The same prompt in another run is that run's: this run's columns hold only its own rows.
    timeline = run_prompt_timeline(run=other, key=KEY_A)
    assert timeline is not None
    assert {r.run_id for c in timeline["steps"] for r in c["rollouts"]} == {other.pk}


def test_a_run_stored_before_prompt_tracking_has_no_prompts(owner):
    run = legacy_run(owner)
    page = run_prompts(run=run)
    assert (page.count, page.untracked, page.results) == (0, 3, [])


def test_many_steps_default_to_eight_evenly_spaced_columns(owner):
    run = running_run(owner)
    prompt = [{"role": "user", "content": "Echo 'again'."}]
    rows = [{"step": step, "env": "echo", "seed": 5, "prompt": prompt, "messages": [], "rewards": {},
             "reward": float(step)} for step in range(1, 21)]
    telemetry_record(run_id=run.pk, lease_owner="lease", events=[("rollouts", rows)])

    timeline = run_prompt_timeline(run=run, key=prompt_key("echo", prompt, 5))

    assert timeline is not None
    assert timeline["default_steps"] == [1, 4, 6, 9, 12, 15, 17, 20]
    assert [c["step"] for c in timeline["steps"]] == [1, 4, 6, 9, 12, 15, 17, 20]
    assert (timeline["trained_step_count"], timeline["trained_steps"]) == (20, list(range(1, 21)))
    assert [c["reward_std"] for c in timeline["steps"]] == [None] * 8  # one rollout a group


def test_a_column_lists_at_most_the_group_cap(owner):
    run = running_run(owner)
    rows = [{"step": 1, "env": "echo", "seed": 1, "prompt": PROMPT_A, "messages": [], "rewards": {},
             "reward": 1.0} for _ in range(MAX_GROUP_ROLLOUTS + 3)]
    telemetry_record(run_id=run.pk, lease_owner="lease", events=[("rollouts", rows)])

    timeline = run_prompt_timeline(run=run, key=prompt_key("echo", PROMPT_A, 1))

    assert timeline is not None
    column = timeline["steps"][0]
    assert (column["rollout_count"], len(column["rollouts"])) == (MAX_GROUP_ROLLOUTS + 3, MAX_GROUP_ROLLOUTS)
    assert [r.seq for r in column["rollouts"]] == list(range(1, MAX_GROUP_ROLLOUTS + 1))
    assert Rollout.objects.filter(run=run).count() == MAX_GROUP_ROLLOUTS + 3


def test_evenly_spaced_keeps_the_ends():
    assert evenly_spaced([1, 2, 3], 8) == [1, 2, 3]
    assert evenly_spaced(list(range(0, 100, 10)), 4) == [0, 30, 60, 90]
    assert evenly_spaced([4, 7, 9], 1) == [9]
    assert evenly_spaced([], 8) == []


@pytest.mark.parametrize(
    ("raw", "steps"),
    [(None, None), ("", None), ("  ", None), ("1,5, 9", [1, 5, 9]), ("9,1,1", [1, 9]), ("0", [0])],
)
def test_steps_parse(raw, steps):
    assert prompt_steps_parse(raw) == steps


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("a", "steps must be whole step numbers separated by commas, like 1,5,9; got 'a'"),
        ("-1", "steps must be whole step numbers separated by commas, like 1,5,9; got '-1'"),
        ("1.5", "steps must be whole step numbers separated by commas, like 1,5,9; got '1.5'"),
        # ARABIC-INDIC DIGIT ONE, a digit to str.isdigit() and int() but not a step number here.
        ("\u0661", "steps must be whole step numbers separated by commas, like 1,5,9; got '\u0661'"),
        ("1,,2", "steps has an empty item (a comma too many); give step numbers separated by commas, like 1,5,9"),
        ("1000000001", "step 1000000001 is past the largest step number, 1000000000"),
        (",".join(str(s) for s in range(MAX_CHOSEN_STEPS + 1)), "steps names 17 steps; choose at most 16"),
        ("1," * 201, "steps is 402 characters long; give at most 16 step numbers separated by commas "
                     "(at most 400 characters)"),
    ],
)
def test_steps_parse_refuses(raw, message):
    with pytest.raises(PromptStepsError) as refused:
        prompt_steps_parse(raw)
    assert str(refused.value) == message
