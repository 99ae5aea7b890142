"""Security review N4: one per-user quota over everything that takes a worker, and a size cap
on stored transcripts. The evaluation case registers a real echo server (uvicorn) and is
refused before anything is queued, so no worker is needed."""

from __future__ import annotations

import json

import pytest

from tests.e2e.helpers import register_echo
from tests.factories import RunFactory
from webapp.core.quota import WorkQuotaExceeded, active_work
from webapp.core.transcripts import cap_transcript
from webapp.evaluations.models import Evaluation
from webapp.evaluations.services import evaluation_create
from webapp.jobs.models import Job
from webapp.jobs.services import job_create
from webapp.runs.config import RunConfigError

pytestmark = pytest.mark.django_db


def test_runs_evaluations_and_jobs_count_against_one_quota(api, owner, outsider, echo_url, settings, broker) -> None:
    settings.ENVLAB_MAX_ACTIVE_WORK = 2
    RunFactory(owner=owner, status="queued")
    job_create(owner=owner, kind="dry_run", params={}, total=1)
    assert active_work(owner) == {"runs": 1, "jobs": 1}

    with pytest.raises(WorkQuotaExceeded) as refused:
        job_create(owner=owner, kind="dry_run", params={}, total=1)
    assert refused.value.errors["non_field_errors"][0].startswith(
        "you have 2 queued or running (1 jobs, 1 runs), and one account may have at most 2 at once"
    )
    env_id = register_echo(api, echo_url)
    with pytest.raises(RunConfigError) as also:
        evaluation_create(owner=owner, data={"environment": env_id, "models": ["random"], "episodes": 1})
    assert also.value.errors == refused.value.errors
    assert (Job.objects.filter(owner=owner).count(), Evaluation.objects.filter(owner=owner).count()) == (1, 0)
    # Another account is not held back by this one's work; finished work no longer counts.
    assert job_create(owner=outsider, kind="dry_run", params={}, total=1).status == "queued"
    Job.objects.filter(owner=owner).update(status="succeeded")
    assert job_create(owner=owner, kind="dry_run", params={}, total=1).status == "queued"


def test_a_long_transcript_keeps_its_head_and_tail_within_the_cap() -> None:
    # The review's case: 150 tool answers of 64 KB each (about 9.9 MB).
    messages = [{"role": "user", "content": "play"}]
    for call in range(150):
        messages.append({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "t", "arguments": {"n": call}}}]})
        messages.append({"role": "tool", "content": f"answer {call} " + "x" * 64_000})
    capped = cap_transcript(messages, limit=1_048_576)
    assert len(json.dumps(capped, ensure_ascii=False).encode()) <= 1_048_576
    assert capped[0] == messages[0]
    assert capped[-1]["content"].startswith("answer 149 ")
    [marker] = [m for m in capped if "cut by the lab: the transcript was over" in m.get("content", "")]
    assert marker["role"] == "system"
    small = [{"role": "user", "content": "hi"}]
    assert cap_transcript(small, limit=1_048_576) is small  # what fits is stored as it is


def test_one_huge_message_keeps_the_head_and_tail_of_its_text() -> None:
    text = "HEAD" + "y" * 3_000_000 + "TAIL"
    [clipped] = cap_transcript([{"role": "tool", "content": text}], limit=200_000)
    assert clipped["content"].startswith("HEAD") and clipped["content"].endswith("TAIL")
    assert "characters cut by the lab" in clipped["content"]
    assert len(clipped["content"]) < 200_000
