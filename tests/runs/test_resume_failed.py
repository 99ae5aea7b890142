"""Which failed runs resume (issue 23 item 2): the stored class of failure decides; restart from
a chosen checkpoint as a new attempt; bad input changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import RunFactory
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import RunStateError, run_claim, run_finish, run_resume

pytestmark = pytest.mark.django_db


def _failed(owner, failure: str, *, checkpoint_step: int | None = 6) -> Run:
    run = RunFactory(owner=owner, name="r", max_steps=12)
    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="w")
    Run.objects.filter(pk=run.pk).update(checkpoint_step=checkpoint_step, step=7)
    assert run_finish(run_id=run.pk, lease_owner="lease-a", status="failed", error="boom", step=7, failure=failure)
    run.refresh_from_db()
    return run


def _checkpoints(settings, tmp_path: Path, run: Run, steps: list[int]) -> None:
    settings.RUNS_DIR = tmp_path
    for step in steps:
        folder = tmp_path / str(run.pk) / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text("{}")
        (folder / "config.json").write_text("{}")


def test_an_infrastructure_failure_resumes_from_the_last_checkpoint(owner):
    run = _failed(owner, "infrastructure")
    assert (run.status, run.failure) == ("failed", "infrastructure")
    assert RunEvent.objects.get(run=run, kind="failed").data == {"failure": "infrastructure"}

    resumed = run_resume(run=run)

    assert (resumed.status, resumed.failure, resumed.error, resumed.checkpoint_step) == ("queued", "", "", 6)
    event = RunEvent.objects.filter(run=run, kind="resumed").get()
    assert event.message == "Resume queued from checkpoint step 6."
    assert event.data == {"from_status": "failed", "checkpoint_step": 6, "restart": False}


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        ("config", "this run's failure (configuration error) would recur on a resume: fix it and launch a new run"),
        ("model", "this run's failure (model error) would recur on a resume: fix it and launch a new run"),
        ("alert", "this run's failure (stopped by a run-health alert) would recur on a resume: fix it and launch "
                  "a new run"),
        ("error", "this run's failure (unclassified error) would recur on a resume: fix it and launch a new run"),
    ],
)
def test_a_config_model_alert_or_unclassified_failure_does_not_resume(owner, failure, reason):
    run = _failed(owner, failure)

    with pytest.raises(RunStateError) as refused:
        run_resume(run=run)

    assert str(refused.value) == reason
    run.refresh_from_db()
    assert (run.status, run.failure, run.error) == ("failed", failure, "boom")
    assert not RunEvent.objects.filter(run=run, kind="resumed").exists()


def test_a_failure_given_no_class_is_stored_unclassified_and_other_ends_store_none(owner):
    run = _failed(owner, "")
    assert run.failure == "error"
    other = RunFactory(owner=owner, name="r")
    run_claim(run_id=other.pk, lease_owner="lease-b", worker_name="w")
    run_finish(run_id=other.pk, lease_owner="lease-b", status="interrupted", error="away", failure="infrastructure")
    other.refresh_from_db()
    assert (other.status, other.failure) == ("interrupted", "")


def test_an_unknown_failure_class_is_refused_and_nothing_is_written(owner):
    run = RunFactory(owner=owner, name="r")
    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="w")
    with pytest.raises(ValueError, match="unknown failure class 'gremlins'"):
        run_finish(run_id=run.pk, lease_owner="lease-a", status="failed", error="x", failure="gremlins")
    run.refresh_from_db()
    assert (run.status, run.failure) == ("running", "")


def test_restart_from_a_chosen_checkpoint_as_a_new_attempt(owner, settings, tmp_path):
    run = _failed(owner, "infrastructure", checkpoint_step=9)
    _checkpoints(settings, tmp_path, run, [3, 6, 9])

    resumed = run_resume(run=run, checkpoint=3)

    assert (resumed.status, resumed.checkpoint_step) == ("queued", 3)
    event = RunEvent.objects.filter(run=run, kind="resumed").get()
    assert event.message == "Restart queued from checkpoint step 3 as a new attempt."
    assert event.data == {"from_status": "failed", "checkpoint_step": 3, "restart": True}


def test_restart_from_a_checkpoint_the_run_does_not_have_is_refused(owner, settings, tmp_path):
    run = _failed(owner, "infrastructure", checkpoint_step=9)
    _checkpoints(settings, tmp_path, run, [3, 9])

    with pytest.raises(RunStateError) as refused:
        run_resume(run=run, checkpoint=6)

    assert str(refused.value) == f"run {run.pk} has no checkpoint at step 6; it has 3, 9"
    run.refresh_from_db()
    assert (run.status, run.checkpoint_step, run.failure) == ("failed", 9, "infrastructure")


def test_the_api_says_which_runs_resume_and_refuses_bad_input(api, owner, settings, tmp_path):
    config_failed = _failed(owner, "config")
    infra_failed = _failed(owner, "infrastructure", checkpoint_step=9)
    _checkpoints(settings, tmp_path, infra_failed, [9])

    shown = api.get(f"/api/runs/{config_failed.pk}/").json()
    assert (shown["failure"], shown["resumable"]) == ("config", False)
    assert shown["resumable_reason"].startswith("this run's failure (configuration error) would recur")
    refused = api.post(f"/api/runs/{config_failed.pk}/resume/")
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith("this run's failure (configuration error) would recur")

    shown = api.get(f"/api/runs/{infra_failed.pk}/").json()
    assert (shown["failure"], shown["resumable"], shown["resumable_reason"]) == ("infrastructure", True, None)
    for body in ({"checkpoint": "three"}, {"checkpoint": -1}):
        bad = api.post(f"/api/runs/{infra_failed.pk}/resume/", body, format="json")
        assert bad.status_code == 400, bad.json()
        assert "checkpoint" in bad.json()
    listed = api.post(f"/api/runs/{infra_failed.pk}/resume/", [1], format="json")
    assert listed.status_code == 400
    infra_failed.refresh_from_db()
    assert (infra_failed.status, infra_failed.checkpoint_step) == ("failed", 9)

    resumed = api.post(f"/api/runs/{infra_failed.pk}/resume/", {"checkpoint": 9}, format="json")
    assert resumed.status_code == 200, resumed.json()
    assert (resumed.json()["status"], resumed.json()["checkpoint_step"]) == ("queued", 9)


def test_the_run_page_offers_resume_only_where_it_works(owner_client, owner):
    config_failed = _failed(owner, "config")
    infra_failed = _failed(owner, "infrastructure")

    page = owner_client.get(f"/runs/{config_failed.pk}/").content.decode()
    assert 'id="resume-form" hidden' in page
    assert "Failure: Configuration error</p>" in page
    assert "Cannot resume: this run&#x27;s failure (configuration error) would recur on a resume" in page

    page = owner_client.get(f"/runs/{infra_failed.pk}/").content.decode()
    assert 'id="resume-form" hidden' not in page
    assert "Failure: Infrastructure failure (resumable from the last checkpoint)</p>" in page
    assert '<p class="waiting-note" id="run-not-resumable" hidden></p>' in page
