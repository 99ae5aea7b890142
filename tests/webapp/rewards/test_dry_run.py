"""Reward dry runs: the request checked at the edge (a refusal writes nothing), the report's
arithmetic on hand-made groups, and the job's shape at GET /api/jobs/<id>/."""

from __future__ import annotations

import json

import pytest

from tests.e2e.helpers import register_echo
from tests.factories import JobFactory
from tests.support.recipes import WORDLE_GUIDE
from webapp.jobs.models import Job
from webapp.workbench.dry_run import dry_run_report, histogram

pytestmark = pytest.mark.django_db

GUIDE = WORDLE_GUIDE[:2]  # the win and the greens


@pytest.fixture
def recipe(api) -> int:
    created = api.post("/api/reward-recipes/", {"name": "guide", "terms": GUIDE}, format="json")
    assert created.status_code == 201, created.json()
    return int(created.json()["id"])


def test_report_counts_zero_variance_groups_and_within_group_spread():
    groups = [
        [{"a": 1.0, "total": 1.0}, {"a": 1.0, "total": 1.0}],
        [{"a": 0.0, "total": 0.0}, {"a": 1.0, "total": 1.0}],
        [{"a": None, "total": None}, {"a": None, "total": None}],  # nothing applied: 0 for GRPO
        [{"a": 0.5, "total": 0.5}, {"a": 0.5, "total": 0.5}],
    ]
    report = dry_run_report(groups=groups, term_names=["a"], policy="random")
    assert report["zero_variance_fraction"] == 0.75
    assert report["mean_group_std"] == pytest.approx(0.125)
    assert report["terms"]["a"]["count"] == 6 and report["terms"]["a"]["none"] == 2
    assert report["total"]["count"] == 8 and report["total"]["mean"] == pytest.approx(0.5)
    assert report["verdict"] == (
        "75 % of groups give every episode the same reward: GRPO will learn little from this recipe with random"
    )


def test_histograms_have_equal_bins_and_one_bin_for_a_constant():
    assert histogram([0.0, 0.0, 0.0]) == {"edges": [0.0, 0.0], "counts": [3]}
    spread = histogram([0.0, 0.5, 1.0, 1.0], bins=2)
    assert spread == {"edges": [0.0, 0.5, 1.0], "counts": [1, 3]}


def test_an_accepted_dry_run_is_a_queued_job_on_the_train_queue(
    api, recipe, echo_url, broker, django_capture_on_commit_callbacks
):
    env_id = register_echo(api, echo_url)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/reward-recipes/{recipe}/dry-run/",
            {"environment": env_id, "policy": "random", "groups": 3, "group_size": 2, "seed": 5},
            format="json",
        )
    assert response.status_code == 202, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert response.json() == {"id": job.pk, "status": "queued"}
    assert (job.kind, job.progress_total, job.params["version"], job.params["policy"]["kind"]) == (
        "dry_run", 6, 1, "random",
    )
    assert [t["name"] for t in job.params["terms"]] == ["win", "greens"]
    assert [json.loads(m)["headers"]["argsrepr"] for m in broker.lrange("train", 0, -1)] == [f"({job.pk},)"]
    shown = api.get(f"/api/jobs/{job.pk}/").json()
    assert {k: shown[k] for k in ("id", "kind", "status", "progress", "result", "error")} == {
        "id": job.pk, "kind": "dry_run", "status": "queued",
        "progress": {"done": 0, "total": 6, "fraction": 0.0}, "result": None, "error": "",
    }


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({"policy": "random", "group_size": 1}, {"group_size": ["Input should be greater than or equal to 2"]}),
        ({"policy": "random", "groups": 99}, {"groups": ["Input should be less than or equal to 32"]}),
        ({"policy": "nobody/x y"}, {"policy": [
            "give a hub id 'org/name', an absolute local folder, 'demo:<name>', 'solver' or 'random'"]}),
        ({"policy": {"run": 999999}}, {"policy": ["no run with id 999999"]}),
        ({"policy": "random", "version": 7}, {"version": ["reward recipe 'guide' has no version 7"]}),
        ({"policy": "random", "bogus": 1}, {"bogus": ["Extra inputs are not permitted"]}),
    ],
)
def test_refusals_name_the_field_and_write_nothing(api, recipe, echo_url, body, errors):
    env_id = register_echo(api, echo_url)
    response = api.post(f"/api/reward-recipes/{recipe}/dry-run/", {"environment": env_id, **body}, format="json")
    assert (response.status_code, response.json()) == (400, errors)
    assert Job.objects.count() == 0


def test_others_recipes_and_jobs_are_not_found(api, outsider_api, recipe, echo_url, owner):
    env_id = register_echo(api, echo_url)
    refused = outsider_api.post(f"/api/reward-recipes/{recipe}/dry-run/", {"environment": env_id}, format="json")
    assert refused.status_code == 404
    job = JobFactory(owner=owner)
    assert outsider_api.get(f"/api/jobs/{job.pk}/").status_code == 404
    assert Job.objects.count() == 1
