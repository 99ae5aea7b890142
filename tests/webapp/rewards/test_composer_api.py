"""The composer's endpoints: the kinds and attributes it offers, a draft checked as a save
checks it (and nothing written), and a draft scored on one stored rollout of your own runs,
with the tree the total came out of."""

from __future__ import annotations

import pytest

from tests.factories import EnvironmentFactory, RolloutFactory, RunFactory
from webapp.catalog.models import Environment
from webapp.rewards.models import RewardRecipe
from webapp.rewards.scoring import Episode, episode_from_stored
from webapp.rewards.terms import KINDS
from webapp.runs.models import Rollout, Run

pytestmark = pytest.mark.django_db

# The guide's Wordle recipe: 1 + 0.5 x (1 - guesses/6) on a win, 0.1 x best_greens when
# not won, -0.1 x invalid_moves.
WORDLE = [
    {"name": "win", "kind": "success_bonus", "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": 6}},
    {"name": "greens", "kind": "partial_credit", "params": {"attribute": "best_greens", "scale": 0.1}},
    {"name": "invalid", "kind": "penalty", "params": {"attribute": "invalid_moves", "scale": 0.1}},
]  # fmt: skip
WON = {
    "attributes": {"won": 1.0, "num_guesses": 3.0, "max_guesses": 6.0, "best_greens": 5.0, "invalid_moves": 2.0},
    "components": {}, "completion_tokens": 40, "completion_chars": 120,
}  # fmt: skip
LOST_GAME = {
    "attributes": {"won": 0.0, "num_guesses": 6.0, "best_greens": 3.0, "invalid_moves": 1.0},
    "components": {}, "completion_tokens": 50, "completion_chars": 150,
}  # fmt: skip


def _run(owner, name="stored") -> Run:
    return RunFactory(owner=owner, name=name, max_steps=2, status="succeeded")


def _rollout(run: Run, seq: int, episode: dict, *, env="wordle", unscored=False) -> Rollout:
    return RolloutFactory(
        run=run, seq=seq, env=env, episode=episode, unscored=unscored,
        rewards={"win": 1.25}, reward=1.25,
    )  # fmt: skip


# --- kinds -------------------------------------------------------------------------------------


def test_kinds_come_from_the_registry_with_typed_fields_and_attributes_per_environment(api, owner, outsider):
    EnvironmentFactory(
        name="my-wordle",
        base_url="http://127.0.0.1:1",
        owner=owner,
        metadata={"style": "bundled", "adapter": "wordle"},
    )  # fmt: skip
    EnvironmentFactory(name="generated", base_url="http://127.0.0.1:2", owner=owner, metadata={})
    EnvironmentFactory(name="theirs", base_url="http://127.0.0.1:3", owner=outsider, metadata={})

    response = api.get("/api/reward-recipes/kinds/")

    assert response.status_code == 200
    body = response.json()
    assert [k["kind"] for k in body["kinds"]] == list(KINDS)
    bonus = next(k for k in body["kinds"] if k["kind"] == "success_bonus")
    assert (bonus["container"], bonus["children"], bonus["description"]) == (
        False, {"min": 0, "max": 0}, "on a win 1 + speed_bonus x (1 - steps/max_steps), else 0",
    )  # fmt: skip
    assert [(f["name"], f["control"], f["required"], f["default"]) for f in bonus["fields"]] == [
        ("speed_bonus", "number", False, 0.0),
        ("steps", "attribute", False, "steps"),
        ("max_steps", "number_or_attribute", False, None),
    ]
    assert (bonus["fields"][0]["minimum"], bonus["fields"][0]["maximum"]) == (-100, 100)
    assert bonus["fields"][2]["description"] == "A number, or the attribute that holds the most steps allowed."
    assert bonus["schema"]["properties"]["speed_bonus"]["type"] == "number"  # pydantic's JSON schema
    component = next(k for k in body["kinds"] if k["kind"] == "component")
    assert [(f["name"], f["control"], f["options"]) for f in component["fields"]] == [
        ("source", "select", ["rubric_scores", "reward_signals", "calls"]),
        ("name", "text", None),
    ]
    gate = next(k for k in body["kinds"] if k["kind"] == "gate")
    assert (gate["container"], gate["children"]) == (True, {"min": 1, "max": 1})
    # Only environments the caller sees, with the bundled kind their registration recorded.
    assert body["environments"] == [
        {"id": Environment.objects.get(name="generated").pk, "name": "generated", "key": ""},
        {"id": Environment.objects.get(name="my-wordle").pk, "name": "my-wordle", "key": "wordle"},
    ]
    wordle = [a["name"] for a in body["attributes"]["wordle"]]
    assert wordle[:5] == ["won", "num_guesses", "max_guesses", "best_greens", "invalid_moves"]
    assert "best_greens" not in [a["name"] for a in body["attributes"][""]]  # what every adapter reports
    assert [a["name"] for a in body["attributes"][""]][:2] == ["reward", "reward_last"]


def test_the_composer_endpoints_need_a_signed_in_user(client):
    assert client.get("/api/reward-recipes/kinds/").status_code in (401, 403)
    assert client.post("/api/reward-recipes/validate/", {}, content_type="application/json").status_code in (401, 403)
    assert client.post("/api/reward-recipes/preview/", {}, content_type="application/json").status_code in (401, 403)


# --- validate ------------------------------------------------------------------------------------


def test_a_valid_draft_has_no_errors_and_nothing_is_written(api):
    response = api.post("/api/reward-recipes/validate/", {"terms": WORDLE}, format="json")
    assert (response.status_code, response.json()) == (200, {"ok": True, "errors": []})
    assert RewardRecipe.objects.count() == 0


@pytest.mark.parametrize(
    ("terms", "errors"),
    [
        (
            [{**WORDLE[0], "params": {"speed_bonus": 0.5}}],
            [{"path": "terms.0.params.max_steps", "message": "a speed_bonus needs max_steps (a number or an attribute name)"}],
        ),
        (
            [{"name": "sum", "kind": "weighted_sum", "terms": [{**WORDLE[2], "params": {"attribute": "invalid_moves", "scale": 5000}}]}],
            [{"path": "terms.0.terms.0.params.scale", "message": "penalty: Input should be less than or equal to 1000"}],
        ),
        (
            [{"name": "f", "kind": "expression", "params": {"expression": "won + x.y"}}],
            [{"path": "terms.0.params.expression", "message": "expression: attribute access ('.') at column 7 is not allowed"}],
        ),
        (
            [WORDLE[0], {**WORDLE[1], "name": "win"}],
            [{"path": "terms.1.name", "message": "reward term names must be unique: 'win' is used twice"}],
        ),
        (
            [{"name": "g", "kind": "gate", "terms": []}],
            [{"path": "terms.0.terms", "message": "a gate term takes exactly 1 child terms, not 0"}],
        ),
        ([], [{"path": "terms", "message": "List should have at least 1 item after validation, not 0"}]),
    ],
)  # fmt: skip
def test_each_error_names_the_path_of_its_row_as_a_save_would(api, terms, errors):
    response = api.post("/api/reward-recipes/validate/", {"terms": terms}, format="json")
    assert (response.status_code, response.json()) == (200, {"ok": False, "errors": errors})
    saved = api.post("/api/reward-recipes/", {"name": "same checks", "terms": terms}, format="json")
    assert (saved.status_code, saved.json()) == (400, {e["path"]: [e["message"]] for e in errors})
    assert RewardRecipe.objects.count() == 0


def test_a_given_name_is_checked_and_stray_fields_refused(api):
    response = api.post("/api/reward-recipes/validate/", {"name": "  ", "terms": WORDLE, "bogus": 1}, format="json")
    assert response.json() == {
        "ok": False,
        "errors": [
            {"path": "name", "message": "give the recipe a name"},
            {"path": "bogus", "message": "Extra inputs are not permitted"},
        ],
    }
    refused = api.post("/api/reward-recipes/validate/", ["not", "an", "object"], format="json")
    assert refused.json() == {"ok": False, "errors": [{"path": "", "message": "expected a JSON object"}]}


def test_an_episode_from_stored_facts_keeps_only_finite_numbers():
    facts = {
        "attributes": {"won": 1.0, "num_guesses": 3, "flag": True, "text": "x", "inf": float("inf")},
        "components": {"rubric_scores": {"a": 0.5, "b": None}, "broken": [1, 2]},
        "completion_tokens": 12, "completion_chars": -1,
    }  # fmt: skip
    assert episode_from_stored("wordle", facts, False) == Episode(
        env_name="wordle", attributes={"won": 1.0, "num_guesses": 3.0},
        components={"rubric_scores": {"a": 0.5}}, completion_tokens=12, completion_chars=None, lost=False,
    )  # fmt: skip
    assert episode_from_stored("", {}, True) == Episode(lost=True)


# --- preview --------------------------------------------------------------------------------------


def test_preview_scores_a_stored_won_episode_and_shows_the_tree(api, owner):
    run = _run(owner)
    _rollout(run, 7, WON)

    response = api.post("/api/reward-recipes/preview/", {"terms": WORDLE, "rollout": {"run": run.pk, "seq": 7}}, format="json")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["values"] == {"win": 1.25, "greens": 0.0, "invalid": -0.2}  # 1 + 0.5 x (1 - 3/6)
    assert body["total"] == pytest.approx(1.05)
    assert [(n["name"], n["kind"], n["weight"], n["value"], n["contribution"], n["applies"], n["children"]) for n in body["tree"]] == [
        ("win", "success_bonus", 1.0, 1.25, 1.25, True, []),
        ("greens", "partial_credit", 1.0, 0.0, 0.0, True, []),
        ("invalid", "penalty", 1.0, -0.2, -0.2, True, []),
    ]  # fmt: skip
    assert body["rollout"] == {
        "run": run.pk, "seq": 7, "step": 1, "env": "wordle", "unscored": False,
        "stored_reward": 1.25, "stored_rewards": {"win": 1.25},
    }  # fmt: skip
    assert body["attributes"] == WON["attributes"]


def test_preview_of_a_nested_tree_limited_to_environments(api, owner):
    run = _run(owner)
    _rollout(run, 1, WON)
    _rollout(run, 2, LOST_GAME)  # the newest: taken when no seq is given
    terms = [
        {"name": "wordle_part", "kind": "weighted_sum", "weight": 2.0, "environments": ["wordle"], "terms": [
            {**WORDLE[1], "weight": 0.5},
            WORDLE[2],
        ]},
        {"name": "catch_only", "kind": "weighted_sum", "environments": ["catch"], "terms": [
            {"name": "catch_reward", "kind": "env_reward"},
        ]},
        {"name": "won_gate", "kind": "gate", "params": {"threshold": 1.0}, "terms": [
            {"name": "won", "kind": "expression", "params": {"expression": "won"}},
        ]},
    ]  # fmt: skip

    body = api.post("/api/reward-recipes/preview/", {"terms": terms, "rollout": {"run": run.pk}}, format="json").json()

    # greens 0.1 x 3 = 0.3 (not won), invalid -0.1; the sum 0.5 x 0.3 - 0.1 = 0.05; top 2 x 0.05.
    assert body["rollout"]["seq"] == 2
    assert body["values"] == pytest.approx(
        {"greens": 0.3, "invalid": -0.1, "wordle_part": 0.05, "catch_reward": None, "catch_only": None,
         "won": 0.0, "won_gate": 0.0}
    )
    assert body["total"] == pytest.approx(0.1)
    part, catch, gate = body["tree"]
    assert [(c["name"], c["contribution"]) for c in part["children"]] == [
        ("greens", pytest.approx(0.15)), ("invalid", pytest.approx(-0.1)),
    ]  # fmt: skip
    assert (part["contribution"], catch["applies"], catch["value"], catch["contribution"]) == (pytest.approx(0.1), False, None, None)
    assert [(c["name"], c["applies"], c["value"]) for c in catch["children"]] == [("catch_reward", False, None)]
    assert (gate["children"][0]["name"], gate["children"][0]["contribution"], gate["value"]) == ("won", None, 0.0)


def test_a_lost_rollout_scores_nothing(api, owner):
    run = _run(owner)
    _rollout(run, 1, WON, unscored=True)
    body = api.post("/api/reward-recipes/preview/", {"terms": WORDLE, "rollout": {"run": run.pk, "seq": 1}}, format="json").json()
    assert (body["total"], body["values"]) == (None, {"win": None, "greens": None, "invalid": None})
    assert [n["applies"] for n in body["tree"]] == [False, False, False]


def test_a_rollout_stored_before_episodes_were_kept_is_a_clear_400(api, owner):
    run = _run(owner)
    _rollout(run, 4, {})
    response = api.post("/api/reward-recipes/preview/", {"terms": WORDLE, "rollout": {"run": run.pk, "seq": 4}}, format="json")
    assert (response.status_code, response.json()) == (
        400, {"rollout": [f"rollout 4 of run {run.pk} was stored before episodes were kept; re-run"]},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({"terms": [{**WORDLE[0], "params": {"speed_bonus": 0.5}}], "rollout": {"run": 1, "seq": 0}},
         {"terms.0.params.max_steps": ["a speed_bonus needs max_steps (a number or an attribute name)"]}),
        ({"terms": WORDLE}, {"rollout": ["Field required"]}),
        ({"terms": WORDLE, "rollout": {"run": 0, "seq": -1}},
         {"rollout.run": ["Input should be greater than or equal to 1"], "rollout.seq": ["Input should be greater than or equal to 0"]}),
        ({"terms": WORDLE, "rollout": {"run": 1}, "extra": True}, {"extra": ["Extra inputs are not permitted"]}),
    ],
)  # fmt: skip
def test_preview_refusals_name_the_field(api, body, errors):
    response = api.post("/api/reward-recipes/preview/", body, format="json")
    assert (response.status_code, response.json()) == (400, errors)


def test_preview_reads_only_the_callers_runs(api, outsider_api, owner):
    run = _run(owner)
    _rollout(run, 1, WON)
    ref = {"terms": WORDLE, "rollout": {"run": run.pk, "seq": 1}}
    assert outsider_api.post("/api/reward-recipes/preview/", ref, format="json").status_code == 404
    missing_seq = {"terms": WORDLE, "rollout": {"run": run.pk, "seq": 99}}
    assert api.post("/api/reward-recipes/preview/", missing_seq, format="json").status_code == 404
    empty = _run(owner, "no rollouts")
    newest_of_none = {"terms": WORDLE, "rollout": {"run": empty.pk}}
    assert api.post("/api/reward-recipes/preview/", newest_of_none, format="json").status_code == 404
    assert api.post("/api/reward-recipes/preview/", ref, format="json").status_code == 200
