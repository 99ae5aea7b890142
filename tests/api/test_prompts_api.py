"""`GET /api/runs/<id>/prompts/` and `GET /api/runs/<id>/prompts/<key>/`: who may read them,
their exact bodies, pagination and the refused `steps=` / `order=` / `page=`."""

from __future__ import annotations

import math

import pytest

from tests.support.prompt_rows import (
    KEY_A,
    KEY_B,
    PROMPT_A,
    PROMPT_B,
    XSS,
    legacy_run,
    prompted_run,
    running_run,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner):
    return prompted_run(owner)


def _tool_messages(text: str) -> list[dict]:
    return [
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "echo", "arguments": {"message": text}}}]},
        {"role": "tool", "name": "echo", "content": text},
    ]


def test_the_prompt_list(api, run):
    response = api.get(f"/api/runs/{run.pk}/prompts/")

    assert response.status_code == 200
    body = response.json()
    assert body == {
        "count": 2, "untracked_rollouts": 0, "next": None, "previous": None,
        "results": [
            {"prompt_key": KEY_A, "env": "echo", "seed": 11, "prompt": PROMPT_A, "steps": 2, "rollouts": 4,
             "first_step": 1, "last_step": 3, "reward_mean": pytest.approx(0.85)},
            {"prompt_key": KEY_B, "env": "echo", "seed": 22, "prompt": PROMPT_B, "steps": 1, "rollouts": 2,
             "first_step": 2, "last_step": 2, "reward_mean": pytest.approx(0.475)},
        ],
    }


def test_the_prompt_list_pages(api, run):
    first = api.get(f"/api/runs/{run.pk}/prompts/?limit=1&order=fewest_steps").json()
    assert ([r["prompt_key"] for r in first["results"]], first["previous"]) == ([KEY_B], None)
    assert first["next"] == f"http://testserver/api/runs/{run.pk}/prompts/?limit=1&order=fewest_steps&page=2"

    second = api.get(first["next"]).json()
    assert ([r["prompt_key"] for r in second["results"]], second["next"]) == ([KEY_A], None)
    assert second["previous"] == f"http://testserver/api/runs/{run.pk}/prompts/?limit=1&order=fewest_steps&page=1"


def test_the_timeline_of_a_prompt_repeated_at_steps_1_and_3(api, run):
    response = api.get(f"/api/runs/{run.pk}/prompts/{KEY_A}/")

    assert response.status_code == 200
    assert response.json() == {
        "prompt_key": KEY_A, "env": "echo", "seed": 11, "prompt": PROMPT_A,
        "trained_step_count": 2, "trained_steps": [1, 3], "default_steps": [1, 3], "chosen": False,
        "steps": [
            {"step": 1, "rollout_count": 2, "reward_mean": pytest.approx(0.6), "reward_std": pytest.approx(math.sqrt(0.5)),
             "rollouts": [
                 {"seq": 1, "reward": 0.1, "rewards": {"env_reward": 0.0, "tool_called": 1.0}, "advantage": -0.5,
                  "unscored": False, "messages": _tool_messages("alpha?"), "replay_url": f"/replay/runs/{run.pk}/1/"},
                 {"seq": 2, "reward": 1.1, "rewards": {"env_reward": 1.0, "tool_called": 1.0}, "advantage": 0.5,
                  "unscored": False, "messages": _tool_messages("alpha"), "replay_url": f"/replay/runs/{run.pk}/2/"},
             ]},
            {"step": 3, "rollout_count": 2, "reward_mean": pytest.approx(1.1), "reward_std": 0.0,
             "rollouts": [
                 {"seq": 5, "reward": 1.1, "rewards": {"env_reward": 1.0, "tool_called": 1.0}, "advantage": 0.5,
                  "unscored": False, "messages": _tool_messages("alpha"), "replay_url": f"/replay/runs/{run.pk}/5/"},
                 {"seq": 6, "reward": 1.1, "rewards": {"env_reward": 1.0, "tool_called": 1.0}, "advantage": 0.5,
                  "unscored": False, "messages": _tool_messages("alpha"), "replay_url": f"/replay/runs/{run.pk}/6/"},
             ]},
        ],
    }


def test_chosen_steps(api, run):
    body = api.get(f"/api/runs/{run.pk}/prompts/{KEY_B}/?steps=3, 2,1").json()

    assert body["chosen"] is True and body["default_steps"] == [2]
    assert [(s["step"], s["rollout_count"], [r["seq"] for r in s["rollouts"]]) for s in body["steps"]] == [
        (1, 0, []), (2, 2, [3, 4]), (3, 0, []),
    ]
    assert body["steps"][1]["rollouts"][1]["messages"][1]["content"] == XSS  # JSON data, as stored


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("steps=1,x", "steps", "steps must be whole step numbers separated by commas, like 1,5,9; got 'x'"),
        ("steps=1,,2", "steps", "steps has an empty item (a comma too many); give step numbers separated by commas, like 1,5,9"),
        ("steps=" + ",".join(str(s) for s in range(17)), "steps", "steps names 17 steps; choose at most 16"),
        ("steps=99999999999", "steps", "step 99999999999 is past the largest step number, 1000000000"),
    ],
)
def test_bad_steps_are_a_400_that_says_what_to_fix(api, run, query, field, message):
    response = api.get(f"/api/runs/{run.pk}/prompts/{KEY_A}/?{query}")
    assert (response.status_code, response.json()) == (400, {field: [message]})


@pytest.mark.parametrize(
    ("query", "body"),
    [
        ("order=reward", {"order": ["use one of most_steps, fewest_steps, first_step"]}),
        ("page=0", {"page": ["must be between 1 and 1000000"]}),
        ("page=two", {"page": ["'two' is not an integer"]}),
        ("limit=201", {"limit": ["must be between 1 and 200"]}),
    ],
)
def test_bad_list_parameters_are_a_400(api, run, query, body):
    response = api.get(f"/api/runs/{run.pk}/prompts/?{query}")
    assert (response.status_code, response.json()) == (400, body)


def test_an_unknown_prompt_is_a_404(api, run, owner):
    other = running_run(owner, "other")
    assert api.get(f"/api/runs/{run.pk}/prompts/{'0' * 32}/").status_code == 404
    assert api.get(f"/api/runs/{run.pk}/prompts/not-a-key/").status_code == 404
    # The prompt exists, but in another run.
    assert api.get(f"/api/runs/{other.pk}/prompts/{KEY_A}/").status_code == 404


def test_only_those_who_see_the_run_read_its_prompts(api, outsider_api, staff_api, operator_api, run):
    for client, code in ((api, 200), (operator_api, 200), (outsider_api, 404), (staff_api, 404)):
        assert client.get(f"/api/runs/{run.pk}/prompts/").status_code == code
        assert client.get(f"/api/runs/{run.pk}/prompts/{KEY_A}/").status_code == code
    stranger = outsider_api.get(f"/api/runs/{run.pk}/prompts/{KEY_A}/?steps=bad")
    assert stranger.status_code == 404  # the run's existence is not told, not even by a 400
    assert api.get("/api/runs/999999/prompts/").status_code == 404


def test_signed_out_is_refused(client, run):
    assert client.get(f"/api/runs/{run.pk}/prompts/").status_code == 401
    assert client.get(f"/api/runs/{run.pk}/prompts/{KEY_A}/").status_code == 401


def test_a_run_from_before_prompt_tracking(api, owner):
    run = legacy_run(owner)
    body = api.get(f"/api/runs/{run.pk}/prompts/").json()
    assert body == {"count": 0, "untracked_rollouts": 3, "results": [], "next": None, "previous": None}


def test_the_schema_documents_both(api):
    schema = api.get("/api/schema/?format=json").json()
    listed = schema["paths"]["/api/runs/{id}/prompts/"]["get"]
    timeline = schema["paths"]["/api/runs/{id}/prompts/{key}/"]["get"]
    assert [p["name"] for p in listed["parameters"]] == ["id", "limit", "order", "page"]
    assert [p["name"] for p in timeline["parameters"]] == ["id", "key", "steps"]
    assert "200" in listed["responses"] and "200" in timeline["responses"]
