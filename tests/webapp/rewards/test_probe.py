"""The learnability probe (issue 19 item 5): its numbers against stubbed pass rates, the request
checked as a launch checks it (a refusal writes nothing), the new-run page's card and warning,
and the launch of the probed config quoting the probe in its first event and its warnings.
The probe's play through a real worker is tests/e2e/test_probe.py."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from tests.e2e.helpers import register_echo, run_config
from webapp.jobs.models import Job
from webapp.runs.models import Run, RunEvent
from webapp.workbench.dry_run import dry_run_report, learnability_probe, zero_variance_share

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("pass_rate", "group_size", "share"),
    [(0.5, 4, 0.125), (0.1, 4, 0.6562), (0.0, 8, 1.0), (1.0, 2, 1.0), (0.3, 8, 0.0577)],
)
def test_the_expected_zero_variance_share_is_p_to_the_g_plus_its_complement(pass_rate, group_size, share):
    assert zero_variance_share(pass_rate, group_size) == pytest.approx(share, abs=1e-4)


def test_the_probe_counts_passes_above_the_middle_of_the_recipes_range_and_warns_past_half():
    # 2 of 16 episodes pass (above 0.5 of a 0..1 recipe): p = 0.125, (7/8)^4 + (1/8)^4 = 0.5864.
    totals = [0.9, 0.6] + [0.1] * 14
    probe = learnability_probe(totals, group_size=4, floor=0.0, ceiling=1.0)
    assert (probe["passed"], probe["episodes"], probe["pass_rate"]) == (2, 16, 0.125)
    assert probe["pass_threshold"] == 0.5 and probe["threshold_from"] == "the middle of the recipe's range"
    assert probe["expected_zero_variance_fraction"] == pytest.approx(0.875**4 + 0.125**4)
    assert probe["warning"].startswith("About 59 % of groups of 4 would give every completion the same reward")
    # Half pass: 2 x 0.5^4 = 12.5 % expected, no warning.
    even = learnability_probe([1.0, 0.0] * 8, group_size=4, floor=0.0, ceiling=1.0)
    assert (even["pass_rate"], even["expected_zero_variance_fraction"], even["warning"]) == (0.5, 0.125, "")


def test_without_the_recipes_range_the_middle_of_the_scored_totals_is_the_threshold():
    probe = learnability_probe([2.0, 4.0, 4.0, 4.0], group_size=2)
    assert probe["pass_threshold"] == 3.0 and probe["threshold_from"] == "the middle of the totals scored here"
    assert probe["pass_rate"] == 0.75
    # Every episode the same: nobody passes, every group is flat.
    flat = learnability_probe([1.0] * 6, group_size=3)
    assert (flat["pass_rate"], flat["expected_zero_variance_fraction"]) == (0.0, 1.0) and flat["warning"]


def test_every_dry_run_report_carries_the_probe():
    groups = [[{"total": 1.0}, {"total": 0.0}], [{"total": 0.0}, {"total": 0.0}]]
    report = dry_run_report(groups=groups, term_names=[], policy="m", floor=0.0, ceiling=1.0)
    assert report["probe"]["pass_rate"] == 0.25 and report["probe"]["group_size"] == 2
    assert report["probe"]["expected_zero_variance_fraction"] == pytest.approx(0.25**2 + 0.75**2)


def _probed(owner, job: Job, *, pass_rate: float, expected: float, warning: str) -> Job:
    """The job as the worker leaves it, with a stubbed probe in its result."""
    job.status, job.finished_at = Job.Status.SUCCEEDED, timezone.now()
    job.result = {
        "zero_variance_fraction": 0.75,
        "probe": {"episodes": 32, "passed": round(pass_rate * 32), "pass_rate": pass_rate, "pass_threshold": 0.5,
                  "threshold_from": "the middle of the recipe's range", "group_size": 4,
                  "expected_zero_variance_fraction": expected, "warning": warning},
    }
    job.save()
    return job


WARNING = "About 66 % of groups of 4 would give every completion the same reward (pass rate 0.10): ..."


def test_a_probe_is_a_dry_run_of_the_configs_model_temperature_and_group_size(api, owner, echo_url, built_model):
    env_id = register_echo(api, echo_url)
    config = {**run_config(env_id, max_steps=3), "model": built_model}
    config["grpo"]["temperature"] = 0.7
    response = api.post("/api/runs/probe/", {"config": config, "groups": 3}, format="json")
    assert response.status_code == 202, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    params = job.params
    assert (job.kind, job.status, job.progress_total) == ("dry_run", "queued", 3 * config["grpo"]["num_generations"])
    assert (params["groups"], params["group_size"], params["temperature"]) == (3, config["grpo"]["num_generations"], 0.7)
    assert params["policy"]["spec"] == config["model"] and params["environment"] == env_id
    assert params["prompt"] == config["environments"][0]["prompt"] and params["run_config"] == config
    assert [term["name"] for term in params["terms"]] == [term["name"] for term in config["rewards"]]
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: c.update(grpo=None, sft_warmup={"source": "solver"}), "grpo"),
        (lambda c: c.update(model="/nowhere/at/all"), "model"),
        (lambda c: c["environments"][0].update(environment=999999), "environments.0.environment"),
        (lambda c: c["grpo"].update(num_generations=32, per_device_train_batch_size=32), "grpo.num_generations"),
    ],
)
def test_a_config_the_probe_cannot_play_is_refused_naming_the_field_and_writes_nothing(
    api, echo_url, built_model, change, field
):
    config = {**run_config(register_echo(api, echo_url), max_steps=3), "model": built_model}
    change(config)
    response = api.post("/api/runs/probe/", {"config": config}, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert api.post("/api/runs/probe/", {"config": run_config(1, max_steps=3), "groups": 0}, format="json").status_code == 400
    assert not Job.objects.exists()


def test_the_new_run_page_probes_then_shows_the_numbers_and_the_warning(
    owner_client, outsider_client, owner, api, echo_url, built_model
):
    env_id = register_echo(api, echo_url)
    config = {**run_config(env_id, max_steps=3), "model": built_model}

    posted = owner_client.post("/runs/new/", {"mode": "json", "config_json": json.dumps(config), "action": "probe"})
    job = Job.objects.get()
    assert posted.status_code == 302 and posted["Location"] == f"/jobs/{job.pk}/"
    assert not Run.objects.exists()
    job_page = owner_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Learnability probe of run config" in job_page and f'href="/runs/new/?probe={job.pk}"' in job_page

    waiting = owner_client.get(f"/runs/new/?probe={job.pk}").content.decode()
    assert 'id="probe-card"' in waiting and "The probe is queued" in waiting and 'id="probe-warning"' not in waiting

    _probed(owner, job, pass_rate=0.1, expected=0.6561, warning=WARNING + " <b>x</b>")
    page = owner_client.get(f"/runs/new/?probe={job.pk}").content.decode()
    assert 'id="probe-pass-rate">0.10 (3 of 32 episodes above 0.500' in page
    assert 'id="probe-expected">66 %' in page and 'id="probe-measured">75 %' in page
    assert 'id="probe-warning" role="alert">About 66 % of groups' in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page  # job text is shown as text
    assert "&quot;name&quot;: &quot;e2e&quot;" in page  # the probed config fills the JSON form

    # Another user's probe is as absent as a missing one.
    assert 'id="probe-card"' not in outsider_client.get(f"/runs/new/?probe={job.pk}").content.decode()
    assert 'id="probe-card"' not in owner_client.get("/runs/new/?probe=999999").content.decode()


def test_launching_the_probed_config_quotes_the_probe_first_and_warns(api, owner, echo_url, built_model):
    env_id = register_echo(api, echo_url)
    config = {**run_config(env_id, max_steps=3), "model": built_model}
    job = Job.objects.get(pk=api.post("/api/runs/probe/", {"config": config}, format="json").json()["id"])
    _probed(owner, job, pass_rate=0.1, expected=0.6561, warning=WARNING)

    launched = api.post("/api/runs/", config, format="json")
    assert launched.status_code == 201, launched.json()
    assert launched.json()["warnings"] == [f"{WARNING} (learnability probe, job #{job.pk})"]
    first = RunEvent.objects.filter(run_id=launched.json()["id"]).order_by("pk").first()
    assert first.kind == "queued" and first.data["probe"]["job"] == job.pk
    assert first.message == (
        f"Run queued. Learnability probe (job #{job.pk}, 32 episodes): pass rate 0.10, about 66 % of groups of 4 "
        "expected to carry no signal."
    )
    # Another config (another temperature) is not what was probed: its launch quotes nothing.
    config["grpo"]["temperature"] = 0.5
    other = api.post("/api/runs/", {**config, "name": "other"}, format="json").json()
    assert other["warnings"] == []
    assert "probe" not in RunEvent.objects.filter(run_id=other["id"], kind="queued").get().data


def test_a_probe_of_a_saved_recipe_scores_with_its_terms_and_an_unknown_one_is_refused(
    api, owner, echo_url, built_model
):
    from tests.factories import RewardRecipeFactory

    recipe = RewardRecipeFactory(owner=owner, terms=[{"name": "echoed", "kind": "env_reward", "weight": 2.0}])
    config = {**run_config(register_echo(api, echo_url), max_steps=3), "model": built_model, "rewards": {"recipe": recipe.pk}}
    response = api.post("/api/runs/probe/", {"config": config}, format="json")
    assert response.status_code == 202, response.json()
    job = Job.objects.get()
    assert [(t["name"], t["weight"]) for t in job.params["terms"]] == [("echoed", 2.0)]
    # The launch resolves the recipe as the probe did: the same key, so the probe is quoted.
    _probed(owner, job, pass_rate=0.5, expected=0.125, warning="")
    launched = api.post("/api/runs/", config, format="json").json()
    assert RunEvent.objects.get(run_id=launched["id"], kind="queued").data["probe"]["job"] == job.pk
    # Another recipe is another reward: that probe does not speak for it.
    other = RewardRecipeFactory(owner=owner, terms=[{"name": "echoed", "kind": "env_reward", "weight": 0.5}])
    elsewhere = api.post("/api/runs/", {**config, "name": "other", "rewards": {"recipe": other.pk}}, format="json").json()
    assert "probe" not in RunEvent.objects.get(run_id=elsewhere["id"], kind="queued").data
    config["rewards"] = {"recipe": 999999}
    refused = api.post("/api/runs/probe/", {"config": config}, format="json")
    assert refused.status_code == 400 and list(refused.json()) == ["rewards.recipe"]
    assert Job.objects.count() == 1
