"""The rollouts API pages newest first (`before_seq`, as the run page's virtualised list
reads a step from its top), and `/rollouts/steps/` counts each step's rollouts up to the
run's seq."""

from __future__ import annotations

import pytest

from tests.factories import RunFactory
from webapp.runs.models import Rollout, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner):
    run = RunFactory(owner=owner, name="paged", max_steps=3)
    # seq 1..7: step 1 has seqs 1-3, step 2 has 4-7.
    Rollout.objects.bulk_create(
        [Rollout(run=run, seq=seq, step=1 if seq <= 3 else 2, env="echo") for seq in range(1, 8)]
    )
    Run.objects.filter(pk=run.pk).update(last_seq=7)
    return run


def _seqs(body):
    return [row["seq"] for row in body["results"]]


def test_before_seq_pages_a_step_newest_first_until_its_first_rollout(api, run):
    first = api.get(f"/api/runs/{run.pk}/rollouts/", {"step": 2, "before_seq": 8, "limit": 3})
    assert first.status_code == 200
    body = first.json()
    assert _seqs(body) == [7, 6, 5]
    assert body["next"].endswith(f"/api/runs/{run.pk}/rollouts/?step=2&before_seq=5&limit=3")
    rest = api.get(body["next"]).json()
    assert (_seqs(rest), rest["next"]) == ([4], None)
    # Over every step, and the oldest-first cursor untouched.
    assert _seqs(api.get(f"/api/runs/{run.pk}/rollouts/", {"before_seq": 4}).json()) == [3, 2, 1]
    assert _seqs(api.get(f"/api/runs/{run.pk}/rollouts/", {"after_seq": 5}).json()) == [6, 7]


@pytest.mark.parametrize("value", ["0", "-3", "x", str(10**16)])
def test_a_bad_before_seq_is_refused(api, run, value):
    response = api.get(f"/api/runs/{run.pk}/rollouts/", {"before_seq": value})
    assert response.status_code == 400
    assert "before_seq" in response.json()


def test_steps_count_the_rollouts_up_to_the_runs_seq(api, outsider_api, run):
    # A rollout stored past the run's seq (its notification not yet sent) is left out.
    Rollout.objects.create(run=run, seq=8, step=3, env="echo")
    response = api.get(f"/api/runs/{run.pk}/rollouts/steps/")
    assert response.status_code == 200
    assert response.json() == {"last_seq": 7, "steps": [[2, 4], [1, 3]]}
    assert outsider_api.get(f"/api/runs/{run.pk}/rollouts/steps/").status_code == 404


def test_every_listed_rollout_carries_its_replay_url_and_it_opens_for_the_owner(api, owner, run):
    from django.test import Client

    Rollout.objects.filter(run=run, seq__in=[6, 7]).update(prompt_key="ab" * 16, rewards={"env_reward": 1.0})
    page = Client()
    page.force_login(owner)

    listed = api.get(f"/api/runs/{run.pk}/rollouts/", {"after_seq": 5}).json()["results"]
    grouped = api.get(f"/api/runs/{run.pk}/prompts/{'ab' * 16}/").json()["steps"][0]["rollouts"]

    assert [(r["seq"], r["replay_url"]) for r in listed] == [
        (6, f"/replay/runs/{run.pk}/6/"), (7, f"/replay/runs/{run.pk}/7/"),
    ]
    assert [(r["seq"], r["replay_url"]) for r in grouped] == [
        (6, f"/replay/runs/{run.pk}/6/"), (7, f"/replay/runs/{run.pk}/7/"),
    ]
    opened = page.get(listed[0]["replay_url"])
    assert opened.status_code == 200
    assert f"Run #{run.pk} · rollout #6 · step 2" in opened.content.decode()
