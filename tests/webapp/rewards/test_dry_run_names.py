"""Environment-limited terms in recipe jobs: the adapter is bound under the job's run-local
name, so a term limited to "wordle" applies when a dry run (or a learnability job, or a fresh
preview) names its environment "wordle" and is None (not applicable) when it names it "other".

The job functions run here in the test process (worker/play/dry_run.py, worker/play/learnability.py,
worker/play/preview.py), each on a job row claimed as a worker claims it, against the real wordle
server; tests/e2e/test_composer_play.py runs the preview through a real worker process.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

from tests.e2e.helpers import register_lab_entry
from webapp.jobs.models import Job
from webapp.rewards.terms import RewardTerm
from webapp.workbench.learnability import recipe_bounds

# Committed rows: the job's heartbeat thread (worker/play/dry_run.py _Beat) reads them on its own connection.
pytestmark = pytest.mark.django_db(transaction=True)

LEASE = "test-lease"
TERMS = [
    {"name": "win", "kind": "success_bonus", "environments": ["wordle"],
     "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": "max_guesses"}},
    {"name": "tries", "kind": "expression", "weight": 0.0, "params": {"expression": "num_guesses"}},
]  # fmt: skip


@pytest.fixture(scope="module")
def wordle_url() -> Iterator[str]:
    from tests.envs.servers import run_env_server

    with run_env_server("envs.wordle.server:app", {"ENABLE_WEB_INTERFACE": "false", "MAX_CONCURRENT_ENVS": "4"}) as url:
        yield url


@pytest.fixture
def env_id(api, wordle_url) -> int:
    # Named 'wordle' as the bundled entry is (a user's request may not take that name).
    return register_lab_entry(api, "wordle", wordle_url)


@pytest.fixture
def recipe(api) -> int:
    response = api.post("/api/reward-recipes/", {"name": "limited", "terms": TERMS}, format="json")
    assert response.status_code == 201, response.json()
    return int(response.json()["id"])


def _claimed(response) -> Job:
    assert response.status_code == 202, response.json()
    body = response.json()
    job_id = body["job"]["id"] if "job" in body else body["id"]
    # As a worker claims it: with a heartbeat, so another worker alive in the session (the e2e
    # tests' own) that receives the job's message finds it held, not free to take over.
    Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING, lease_owner=LEASE, heartbeat_at=timezone.now())
    return Job.objects.select_related("owner").get(pk=job_id)


@pytest.mark.parametrize(("name", "applies"), [(None, True), ("wordle", True), ("other", False)])
def test_a_term_limited_to_wordle_applies_in_a_dry_run_named_wordle_only(api, env_id, recipe, name, applies):
    from worker.play.dry_run import dry_run

    body = {"environment": env_id, "policy": "solver", "groups": 1, "group_size": 2, "seed": 3}
    job = _claimed(api.post(f"/api/reward-recipes/{recipe}/dry-run/", {**body, **({"name": name} if name else {})}, format="json"))
    assert job.params["name"] == (name or "wordle")  # default: the environment's name slug

    report = dry_run(job, LEASE)

    win, tries = report["terms"]["win"], report["terms"]["tries"]
    assert (tries["count"], tries["none"]) == (2, 0)  # not limited: scored either way
    if applies:
        assert (win["count"], win["none"]) == (2, 0)
        assert win["min"] >= 1.0  # the solver wins: 1 + 0.5 x (1 - guesses/6)
        assert report["total"]["mean"] == win["mean"]
    else:
        assert (win["count"], win["none"], win["mean"]) == (0, 2, None)
        assert report["total"]["max"] == 0.0  # nothing applied: 0, as TRL's nansum of nothing


@pytest.mark.parametrize(("name", "top"), [("wordle", 1 + 0.5 * 5 / 6), ("other", 0.0)])
def test_learnability_binds_the_name_and_bounds_the_recipe_under_it(api, env_id, recipe, name, top):
    from worker.play.learnability import learnability

    job = _claimed(api.post(f"/api/reward-recipes/{recipe}/learnability/", {"environment": env_id, "episodes": 1, "seed": 3, "name": name}, format="json"))

    card = learnability(job, LEASE)

    assert card["range"]["top"] == pytest.approx(top)
    solver_win = card["solver"]["terms"]["win"]
    assert solver_win["none"] == (0 if name == "wordle" else 1)


def test_recipe_bounds_skip_terms_limited_to_other_names():
    terms = [RewardTerm.model_validate(t) for t in TERMS[:1]]
    assert recipe_bounds(terms, "wordle", "wordle") == (pytest.approx(0.0), pytest.approx(1 + 0.5 * 5 / 6))
    assert recipe_bounds(terms, "wordle", "other") == (0.0, 0.0)
    assert recipe_bounds(terms, "wordle") == (0.0, 0.0)  # jobs queued before names were kept: "env"


@pytest.mark.parametrize(("name", "win"), [("wordle", True), ("other", False)])
def test_the_fresh_preview_scores_under_its_name(api, env_id, name, win):
    from worker.play.preview import preview

    play = {"environment": env_id, "policy": "solver", "seed": 3, "name": name}
    job = _claimed(api.post("/api/reward-recipes/preview/", {"terms": TERMS, "play": play}, format="json"))

    result = preview(job, LEASE)

    guesses = result["attributes"]["num_guesses"]
    node = result["tree"][0]
    assert (node["name"], node["applies"], result["episode"]["env"]) == ("win", win, name)
    if win:
        assert result["values"] == {"win": pytest.approx(1 + 0.5 * (1 - guesses / 6)), "tries": guesses}
        assert result["total"] == pytest.approx(1 + 0.5 * (1 - guesses / 6))
    else:
        assert result["values"] == {"win": None, "tries": guesses}
        assert result["total"] == 0.0  # tries weighs 0
    assert Job.objects.get(pk=job.pk).progress_done == 1
