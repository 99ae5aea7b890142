"""Push to the Hub (webapp/workbench/hub_push.py, worker/play/hub_push.py): the request's rules,
and the job itself, run by the real job runner in this process (no Celery: the claim-and-run
plumbing is the same as every job's, tested in tests/e2e), against a STAND-IN Hub
(tests/support/hub_standin.py; the real Hub cannot be reached from here). The uploaded Parquet
has the export endpoint's schema and rows."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
import pytest

from tests.api.test_rollout_export import _body
from tests.factories import EvaluationFactory, RunFactory
from tests.support.hub_standin import hub_standin
from webapp.accounts.secrets import user_secret_set
from webapp.jobs.models import Job
from webapp.jobs.services import job_claim
from webapp.runs.models import Rollout, Run
from worker.play.jobs import run_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def online(monkeypatch):
    """The suite runs with HF_HUB_OFFLINE=1 so that nothing reaches the real Hub; these tests
    let huggingface_hub make requests, which go to the stand-in (or to nothing at all)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

CONFIG = {
    "name": "pushed", "model": "demo:echo",
    "environments": [{"environment": 1, "name": "echo", "prompt": "Echo '{phrase}'."}],
    "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0},
                {"name": "tool_called", "kind": "tool_called", "weight": 0.1}],
}


@pytest.fixture
def finished_run(owner) -> Run:
    run = RunFactory(owner=owner, name="pushed", config=CONFIG, status=Run.Status.SUCCEEDED, step=2)
    for seq in range(1, 6):
        Rollout.objects.create(
            run=run, seq=seq, step=1 + seq // 3, env="echo", seed=seq,
            prompt=[{"role": "user", "content": f"Echo 'p{seq}'."}],
            messages=[{"role": "assistant", "content": f"<b>p{seq}</b>"}],
            rewards={"env_reward": seq / 10, "tool_called": 0.0}, reward=seq / 10, advantage=0.1 * seq - 0.3,
        )
    return run


def test_a_push_is_refused_with_the_field_and_writes_nothing(api, outsider_api, owner, finished_run):
    url = f"/api/runs/{finished_run.pk}/push/"
    assert api.post(url, {"repo_id": "alice/rollouts"}, format="json").json() == {
        "hf_token": ["store your Hugging Face token (account page) first: the upload uses it"]
    }
    user_secret_set(user=owner, name="hf_token", value="hf_alice_secret_0001")
    for bad in ("rollouts", "alice/../x", "-alice/x", "alice/x.git", "a/" + "x" * 120):
        response = api.post(url, {"repo_id": bad}, format="json")
        assert (response.status_code, list(response.json())) == (400, ["repo_id"]), bad
    assert list(api.post(url, {"repo_id": "alice/r", "private": "yes"}, format="json").json()) == ["private"]
    assert list(api.post(url, {"repo_id": "alice/r", "public": True}, format="json").json()) == ["public"]
    # Another user's run is as unknown as a missing one.
    assert outsider_api.post(url, {"repo_id": "eve/r"}, format="json").json() == {
        "run": [f"no run with id {finished_run.pk}"]
    }
    assert api.post("/api/evaluations/999999/push/", {"repo_id": "alice/r"}, format="json").json() == {
        "evaluation": ["no evaluation with id 999999"]
    }
    assert not Job.objects.exists()


def test_the_run_page_offers_the_push_once_the_run_has_ended(owner_client, finished_run):
    page = owner_client.get(f"/runs/{finished_run.pk}/").content.decode()
    assert 'id="hub-push-form"' in page and f'data-api="/api/runs/{finished_run.pk}/push/"' in page
    Run.objects.filter(pk=finished_run.pk).update(status=Run.Status.RUNNING)
    assert 'id="hub-push-form"' not in owner_client.get(f"/runs/{finished_run.pk}/").content.decode()


def test_a_run_is_pushed_as_the_exports_parquet_with_a_card(api, owner, finished_run, settings, online):
    user_secret_set(user=owner, name="hf_token", value="hf_alice_secret_0001")
    queued = api.post(f"/api/runs/{finished_run.pk}/push/", {"repo_id": "alice/echo-rollouts"}, format="json")
    assert queued.status_code == 202, queued.json()
    job = Job.objects.get(pk=queued.json()["id"])
    assert (job.kind, job.params["repo_id"], job.params["private"], job.progress_total) == (
        "hub_push", "alice/echo-rollouts", True, 3
    )

    with hub_standin() as (hub_url, hub):
        settings.ENVLAB_HF_ENDPOINT = hub_url
        assert job_claim(job_id=job.pk, lease_owner="w-1").outcome == "claimed"
        assert run_job(job_id=job.pk, lease_owner="w-1") == "succeeded"

    job.refresh_from_db()
    assert (job.status, job.error, job.progress_done) == ("succeeded", "", 3)
    assert hub.unknown == [] and set(hub.tokens) == {"Bearer hf_alice_secret_0001"}
    assert hub.repos["alice/echo-rollouts"]["visibility"] == "private"
    assert hub.repos["alice/echo-rollouts"]["type"] == "dataset"
    files = hub.files["alice/echo-rollouts"]
    pushed, _ = _pushed_and_exported(api, files, f"/api/runs/{finished_run.pk}/rollouts/export/")
    assert pushed.num_rows == 5
    assert pushed.column("seq").to_pylist() == [1, 2, 3, 4, 5]
    assert job.result == {
        "repo_id": "alice/echo-rollouts", "url": f"{hub_url}/datasets/alice/echo-rollouts", "rows": 5,
        "bytes": len(files["data/train-00000-of-00001.parquet"]), "path": "data/train-00000-of-00001.parquet",
        "commit": f"{1:040x}",
    }
    card = files["README.md"].decode()
    assert card.startswith("---\nconfigs:\n- config_name: default\n")
    assert "5 rollouts of envlab run" in card and '"tool_called"' in card and "## Run config" in card
    assert hub.cards == [card]
    assert "hf_alice_secret_0001" not in card and "hf_alice_secret_0001" not in str(job.result)


def _pushed_and_exported(api, files: dict[str, bytes], export_url: str):
    """The pushed Parquet and the export endpoint's, which it must equal in schema and rows."""
    assert set(files) == {"data/train-00000-of-00001.parquet", "README.md"}
    exported = api.get(f"{export_url}?format=parquet")
    assert exported.status_code == 200
    expected = pq.read_table(io.BytesIO(_body(exported)))
    pushed = pq.read_table(io.BytesIO(files["data/train-00000-of-00001.parquet"]))
    assert pushed.schema == expected.schema and pushed.num_rows == expected.num_rows
    return pushed, expected


def test_a_dead_hub_fails_the_job_with_its_reason(api, owner, finished_run, settings, online):
    from tests.support.ports import free_port

    user_secret_set(user=owner, name="hf_token", value="hf_alice_secret_0001")
    job_id = api.post(f"/api/runs/{finished_run.pk}/push/", {"repo_id": "alice/r"}, format="json").json()["id"]
    settings.ENVLAB_HF_ENDPOINT = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert job_claim(job_id=job_id, lease_owner="w-1").outcome == "claimed"
    assert run_job(job_id=job_id, lease_owner="w-1") == "failed"
    job = Job.objects.get(pk=job_id)
    assert job.status == "failed" and job.progress_done == 1  # the Parquet was written, the Hub was away
    assert "hf_alice_secret_0001" not in job.error and job.error


def test_an_offline_worker_says_why_it_cannot_push(api, owner, finished_run, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    user_secret_set(user=owner, name="hf_token", value="hf_alice_secret_0001")
    job_id = api.post(f"/api/runs/{finished_run.pk}/push/", {"repo_id": "alice/r"}, format="json").json()["id"]
    assert job_claim(job_id=job_id, lease_owner="w-1").outcome == "claimed"
    assert run_job(job_id=job_id, lease_owner="w-1") == "failed"
    error = Job.objects.get(pk=job_id).error
    assert "HF_HUB_OFFLINE=1" in error and "HF_HUB_OFFLINE=0 to push" in error


def test_an_evaluation_is_pushed_as_its_episodes_exports_parquet_with_a_card(api, owner, settings, online):
    from webapp.evaluations.models import EvaluationEpisode

    evaluation = EvaluationFactory(owner=owner, episodes=3, seed=7)
    for index in range(3):
        EvaluationEpisode.objects.create(
            evaluation=evaluation, model_index=0, model="solver", index=index, seed=7 + index, reward=index / 2,
            won=index == 2, messages=[{"role": "user", "content": f"<i>e{index}</i>"}],
        )
    user_secret_set(user=owner, name="hf_token", value="hf_alice_secret_0001")
    queued = api.post(f"/api/evaluations/{evaluation.pk}/push/", {"repo_id": "alice/echo-evals"}, format="json")
    assert queued.status_code == 202, queued.json()
    job = Job.objects.get(pk=queued.json()["id"])

    with hub_standin() as (hub_url, hub):
        settings.ENVLAB_HF_ENDPOINT = hub_url
        assert job_claim(job_id=job.pk, lease_owner="w-1").outcome == "claimed"
        assert run_job(job_id=job.pk, lease_owner="w-1") == "succeeded"

    job.refresh_from_db()
    assert (job.status, job.error) == ("succeeded", "")
    files = hub.files["alice/echo-evals"]
    pushed, expected = _pushed_and_exported(api, files, f"/api/evaluations/{evaluation.pk}/episodes/export/")
    assert pushed.num_rows == 3 and pushed.to_pylist() == expected.to_pylist()
    card = files["README.md"].decode()
    assert f"3 episodes of envlab evaluation {evaluation.pk}" in card and "hf_alice_secret_0001" not in card
    assert job.result["rows"] == 3 and hub.repos["alice/echo-evals"]["type"] == "dataset"
