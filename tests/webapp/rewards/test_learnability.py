"""Learnability cards: the checks' arithmetic on hand-made score lists, the reward range the
terms allow, the request checked at the edge (a refusal writes nothing), the job it queues and
the environment page's card."""

from __future__ import annotations

import json
import math

import pytest
from django.utils import timezone

from tests.e2e.helpers import register_echo
from tests.support.recipes import WORDLE_GUIDE
from webapp.jobs.models import Job
from webapp.rewards.terms import RewardTerm
from webapp.workbench.learnability import learnability_cards, learnability_report, recipe_bounds

GUIDE = WORDLE_GUIDE


def scores(*totals: float | None) -> list[dict[str, float | None]]:
    return [{"a": t, "total": t} for t in totals]


def report(solver, random, floor=0.0, ceiling=1.0):
    return learnability_report(solver=solver, random=random, term_names=["a"], floor=floor, ceiling=ceiling)


def terms(*raw: dict) -> list[RewardTerm]:
    return [RewardTerm.model_validate(t) for t in raw]


# --- the arithmetic ----------------------------------------------------------------------------


def test_a_learnable_recipe_passes_every_check_with_its_numbers():
    card = report(scores(1.0, 1.0, 1.0, 0.5), scores(0.0, 0.0, 0.5, 0.0))
    assert card["range"] == {"top": 1.0, "top_source": "terms", "bottom": 0.0, "bottom_source": "terms",
                             "ceiling": 1.0, "floor": 0.0, "top_band": 0.8}  # fmt: skip
    solver, random = card["solver"], card["random"]
    assert (solver["mean"], solver["max"], solver["at_top"]) == (0.875, 1.0, 0.75)
    assert solver["std"] == pytest.approx(math.sqrt(0.046875))
    assert (random["mean"], random["max"], random["at_top"]) == (0.125, 0.5, 0.0)
    assert solver["histogram"]["counts"] == [0, 0, 0, 0, 0, 1, 0, 0, 0, 3]
    assert random["histogram"]["counts"] == [3, 0, 0, 0, 0, 1, 0, 0, 0, 0]
    assert solver["histogram"]["edges"] == random["histogram"]["edges"]  # one x axis for both
    assert solver["terms"] == {"a": {"mean": 0.875, "none": 0}}
    checks = card["checks"]
    assert {name: c["status"] for name, c in checks.items()} == {
        "reachability": "pass", "random_low": "pass", "separation": "pass", "headroom": "pass"}
    assert checks["separation"]["effect_size"] == pytest.approx(2 * math.sqrt(3))  # 0.75 / 0.2165
    assert (checks["separation"]["difference"], checks["separation"]["rows_ahead"]) == (0.75, 1.0)
    assert (checks["headroom"]["headroom"], checks["headroom"]["fraction"]) == (0.875, 0.875)
    assert checks["reachability"]["reason"] == (
        "the solver reaches 1 of a top of 1 (the ceiling the terms allow); 75 % of its episodes are in the top band")
    assert checks["separation"]["reason"] == (
        "solver - random = 0.75 (3.46 pooled std); the solver beats random on 100 % of the rows")
    assert checks["random_low"]["reason"] == "random's mean, 0.125, sits at 0.12 of the range"
    assert card["verdict"]["status"] == "pass"


def test_a_recipe_random_games_warns_on_separation_and_headroom():
    card = report(scores(1.0, 1.0, 1.0), scores(1.0, 1.0, 1.0))
    checks = card["checks"]
    assert {name: c["status"] for name, c in checks.items()} == {
        "reachability": "pass", "random_low": "warn", "separation": "warn", "headroom": "warn"}
    assert (checks["separation"]["effect_size"], checks["separation"]["rows_ahead"]) == (None, 0.0)
    assert checks["headroom"]["reason"] == "random already reaches 1.00 of the top: little to learn"
    assert checks["random_low"]["reason"] == (
        "random's mean, 1, sits at 1.00 of the range; 100 % of its episodes reach the top band: "
        "a blind policy already scores high")
    assert card["verdict"]["status"] == "warn"
    assert card["verdict"]["text"].startswith("random_low: random's mean, 1, sits at 1.00")
    assert "headroom: random already reaches 1.00 of the top: little to learn" in card["verdict"]["text"]


def test_without_bounds_the_best_and_worst_seen_make_the_range():
    card = report(scores(2.0, 3.0), scores(1.0, 1.0), floor=None, ceiling=None)
    assert (card["range"]["top"], card["range"]["top_source"], card["range"]["bottom"]) == (3.0, "best seen", 1.0)
    assert card["range"]["top_band"] == pytest.approx(2.6)  # 0.2 of the way from 1 to 3
    assert card["solver"]["at_top"] == 0.5
    separation = card["checks"]["separation"]
    assert separation["pooled_std"] == pytest.approx(math.sqrt(0.125))
    assert separation["effect_size"] == pytest.approx(1.5 / math.sqrt(0.125))
    assert card["checks"]["reachability"]["reason"].endswith(
        "(the best total seen (no ceiling from the terms)); 50 % of its episodes are in the top band")


def test_a_ceiling_the_solver_stays_far_below_warns_on_reachability():
    card = report(scores(1.0, 1.1), scores(0.0, 0.0), ceiling=1.5)
    reach = card["checks"]["reachability"]
    assert reach["status"] == "warn" and reach["position"] == pytest.approx(1.1 / 1.5)
    assert reach["reason"] == (
        "the solver's best, 1.1, gets 0.73 of the way up to 1.5 (the ceiling the terms allow): "
        "the top may be out of reach")
    assert card["checks"]["separation"]["status"] == "pass"  # pooled std 0.035: 30 std apart


def test_a_bound_the_scores_pass_gives_way_to_what_was_seen_and_none_counts_as_zero():
    card = report(scores(2.0), scores(None), floor=0.5, ceiling=1.0)
    assert card["range"] == {"top": 2.0, "top_source": "best seen", "bottom": 0.0, "bottom_source": "worst seen",
                             "ceiling": 1.0, "floor": 0.5, "top_band": 1.6}  # fmt: skip
    assert card["random"]["terms"] == {"a": {"mean": None, "none": 1}}
    assert card["checks"]["separation"]["reason"] == (
        "solver - random = 2 (neither policy spreads); the solver beats random on 100 % of the rows")


def test_a_random_policy_far_below_zero_does_not_widen_the_top_band():
    # Wordle's guide recipe: random's refused guesses cost 0.1 each; the band stays 0.2 of 0 to the top.
    top = 1 + 0.5 * 5 / 6
    fast = report(scores(1.25, 7 / 6), scores(-15.0, -15.0), floor=None, ceiling=top)
    assert (fast["range"]["bottom"], fast["range"]["top_band"]) == (-15.0, pytest.approx(0.8 * top))
    assert fast["checks"]["reachability"]["status"] == "pass" and fast["solver"]["at_top"] == 1.0
    assert fast["checks"]["reachability"]["position"] == pytest.approx(1.25 / top)
    slow = report(scores(1.0, 1.05), scores(-15.0, -15.0), floor=None, ceiling=top)
    assert slow["checks"]["reachability"]["status"] == "warn" and slow["solver"]["at_top"] == 0.0
    assert slow["checks"]["random_low"]["status"] == slow["checks"]["headroom"]["status"] == "pass"


def test_a_constant_reward_warns_everywhere():
    card = report(scores(0.0, 0.0), scores(0.0, 0.0), floor=None, ceiling=None)
    assert {c["status"] for c in card["checks"].values()} == {"warn"}
    assert card["checks"]["headroom"]["reason"] == "every episode scores 0: the recipe gives nothing to learn from"


def test_the_report_needs_one_random_score_per_solver_row():
    with pytest.raises(ValueError, match="one solver and one random score per row"):
        report(scores(1.0, 0.0), scores(1.0))


@pytest.mark.parametrize(
    ("raw", "key", "bounds"),
    [
        (GUIDE, "wordle", (None, 1 + 0.5 * 5 / 6)),  # a win in one guess; partial credit only on a loss
        (GUIDE[:2], "wordle", (0.0, 1 + 0.5 * 5 / 6)),
        (GUIDE, "echo", (None, None)),  # best_greens has no known range outside wordle
        ([{"name": "t", "kind": "tool_use"}], "wordle", (0.0, 1.0)),
        ([{"name": "t", "kind": "tool_use", "weight": -2}], "echo", (-2.0, 0.0)),
        ([{"name": "w", "kind": "success_bonus"}], "catch", (0.0, 1.0)),
        ([{"name": "w", "kind": "success_bonus", "params": {"speed_bonus": 0.5, "max_steps": 4}}], "catch",
         (0.0, 1.375)),
        ([{"name": "p", "kind": "penalty"}], "echo", (None, 0.0)),  # tool failures: 0 or more
        ([{"name": "e", "kind": "env_reward"}], "wordle", (None, None)),
        ([{"name": "t", "kind": "tool_use", "environments": ["elsewhere"]}], "echo", (0.0, 0.0)),
        ([{"name": "s", "kind": "weighted_sum", "terms": [
            {"name": "a", "kind": "tool_use", "weight": 0.5},
            {"name": "b", "kind": "partial_credit", "weight": 2, "params": {"attribute": "progress"}}]}],
         "sudoku", (0.0, 2.5)),
        ([{"name": "g", "kind": "gate", "params": {"threshold": 2}, "terms": [{"name": "a", "kind": "tool_use"}]}],
         "echo", (0.0, 0.0)),  # a 0-1 child never passes a gate at 2
    ],
)
def test_recipe_bounds(raw, key, bounds):
    floor, ceiling = recipe_bounds(terms(*raw), key)
    assert (floor, ceiling) == (bounds[0], pytest.approx(bounds[1]) if bounds[1] is not None else None)


# --- the request and the job -------------------------------------------------------------------


@pytest.fixture
def recipe(api) -> int:
    created = api.post("/api/reward-recipes/", {"name": "guide", "terms": GUIDE}, format="json")
    assert created.status_code == 201, created.json()
    return int(created.json()["id"])


@pytest.mark.django_db
def test_an_accepted_request_is_a_queued_learnability_job(
    api, recipe, echo_url, broker, django_capture_on_commit_callbacks
):
    env_id = register_echo(api, echo_url)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/reward-recipes/{recipe}/learnability/", {"environment": env_id, "seed": 4},
                            format="json")  # fmt: skip
    assert response.status_code == 202, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert response.json() == {"id": job.pk, "status": "queued"}
    assert (job.kind, job.progress_total) == ("learnability", 32)  # 16 rows, solver and random
    params = {k: job.params[k] for k in ("recipe", "recipe_name", "version", "environment", "environment_key",
                                           "prompt", "episodes", "seed")}  # fmt: skip
    assert params == {"recipe": recipe, "recipe_name": "guide", "version": 1, "environment": env_id,
                      "environment_key": "echo", "prompt": "Echo '{phrase}'.", "episodes": 16, "seed": 4}  # fmt: skip
    assert [t["name"] for t in job.params["terms"]] == ["win", "greens", "invalid"]
    assert [json.loads(m)["headers"]["argsrepr"] for m in broker.lrange("train", 0, -1)] == [f"({job.pk},)"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({"episodes": 0}, {"episodes": ["Input should be greater than or equal to 1"]}),
        ({"episodes": 65}, {"episodes": ["Input should be less than or equal to 64"]}),
        ({"episodes": "many"}, {"episodes": ["Input should be a valid integer, unable to parse string as an integer"]}),
        ({"seed": -1}, {"seed": ["Input should be greater than or equal to 0"]}),
        ({"version": 7}, {"version": ["reward recipe 'guide' has no version 7"]}),
        ({"policy": "random"}, {"policy": ["Extra inputs are not permitted"]}),
        ({"prompt": "   "}, {"prompt": ["give the prompt of each episode (only the bundled environments have a default)"]}),
        ({"environment": 999999}, {"environment": ["no environment with id 999999"]}),
    ],
)
def test_refusals_name_the_field_and_write_nothing(api, recipe, echo_url, body, errors):
    env_id = register_echo(api, echo_url)
    response = api.post(f"/api/reward-recipes/{recipe}/learnability/", {"environment": env_id, **body}, format="json")
    assert (response.status_code, response.json()) == (400, errors)
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_a_body_that_is_not_an_object_is_refused(api, recipe):
    response = api.post(f"/api/reward-recipes/{recipe}/learnability/", [1, 2], format="json")
    assert (response.status_code, response.json()) == (400, {"non_field_errors": ["expected a JSON object"]})
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_a_strangers_recipe_is_not_found_and_a_strangers_environment_does_not_exist(
    api, outsider_api, recipe, echo_url
):
    env_id = register_echo(api, echo_url)
    refused = outsider_api.post(f"/api/reward-recipes/{recipe}/learnability/", {"environment": env_id}, format="json")
    assert refused.status_code == 404
    theirs = outsider_api.post("/api/reward-recipes/", {"name": "mine", "terms": GUIDE}, format="json").json()["id"]
    response = outsider_api.post(f"/api/reward-recipes/{theirs}/learnability/", {"environment": env_id}, format="json")
    # As the dry runs and evaluations answer: an environment that is not yours does not exist.
    assert (response.status_code, response.json()) == (400, {"environment": [f"no environment with id {env_id}"]})
    assert Job.objects.count() == 0


# --- the environment page ----------------------------------------------------------------------


def _finished(owner, *, recipe: int, name: str, env_id: int, version: int, result: dict, minutes: int) -> Job:
    return Job.objects.create(
        owner=owner, kind="learnability", status="succeeded", progress_total=2, progress_done=2,
        params={"recipe": recipe, "recipe_name": name, "version": version, "environment": env_id},
        result=result, finished_at=timezone.now() - timezone.timedelta(minutes=minutes),
    )  # fmt: skip


@pytest.mark.django_db
def test_the_environment_page_shows_the_newest_card_per_recipe(client, api, owner, outsider, recipe, echo_url):
    env_id = register_echo(api, echo_url)
    good = report(scores(1.0, 1.0, 1.0, 0.5), scores(0.0, 0.0, 0.5, 0.0))
    gamed = report(scores(1.0, 1.0, 1.0), scores(1.0, 1.0, 1.0))
    old = _finished(owner, recipe=recipe, name="guide", env_id=env_id, version=1, result=gamed, minutes=30)
    new = _finished(owner, recipe=recipe, name="guide", env_id=env_id, version=2, result=good, minutes=5)
    _finished(outsider, recipe=recipe, name="guide", env_id=env_id, version=3, result=good, minutes=1)  # not ours
    Job.objects.create(owner=owner, kind="learnability", status="failed", params={"recipe": recipe,
                       "environment": env_id}, finished_at=timezone.now())  # fmt: skip
    cards = learnability_cards(user=owner, environment_id=env_id)
    assert [(c["job"].pk, c["version"], c["verdict"]["status"]) for c in cards] == [(new.pk, 2, "pass")]
    assert old.pk != new.pk

    client.force_login(owner)
    page = client.get(f"/environments/{env_id}/").content.decode()
    assert 'id="learnability"' in page
    assert f'href="/jobs/{new.pk}/"' in page and f'href="/jobs/{old.pk}/"' not in page
    assert page.count('class="learnability-card"') == 1
    assert page.count('class="badge check-pass"') == 4
    assert "the solver reaches 1 of a top of 1 (the ceiling the terms allow)" in page
    assert f'<option value="{recipe}">guide</option>' in page  # the form offers the user's recipes


@pytest.mark.django_db
def test_the_environment_page_without_cards_says_so(client, api, owner, echo_url):
    env_id = register_echo(api, echo_url)
    client.force_login(owner)
    page = client.get(f"/environments/{env_id}/").content.decode()
    assert 'id="learnability-none"' in page and 'class="learnability-card"' not in page
