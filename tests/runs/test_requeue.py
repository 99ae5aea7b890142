"""Queued runs that no worker claimed are sent again (security review M4), and the copies
that re-sending makes are harmless: the claim is one conditional UPDATE, and a copy that
finds the run claimed by another message returns at once. Against the real broker."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import RunFactory
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import run_claim, run_requeue_unclaimed

pytestmark = pytest.mark.django_db


def _sent(broker) -> list[tuple[str, str]]:
    return [
        (m["headers"]["task"], m["headers"]["argsrepr"])
        for m in (json.loads(raw) for raw in broker.lrange("train", 0, -1))
    ]


def _run(owner, *, status=Run.Status.QUEUED, sent_ago: float | None, sends: int = 1) -> Run:
    sent_at = None if sent_ago is None else timezone.now() - timedelta(seconds=sent_ago)
    return RunFactory(owner=owner, name="r", status=status, sent_at=sent_at, sends=sends)


def test_a_queued_run_nobody_claimed_is_sent_again_once(owner, broker, settings):
    settings.ENVLAB_REQUEUE_SECONDS = 180
    # The worker took the message while the database was down: the task failed, the
    # message was acknowledged, and the run stayed queued.
    lost = _run(owner, sent_ago=181)
    never = _run(owner, sent_ago=None)  # the broker was down at launch
    fresh = _run(owner, sent_ago=30)
    running = _run(owner, status=Run.Status.RUNNING, sent_ago=3600)
    cancelled = _run(owner, status=Run.Status.CANCELLED, sent_ago=3600)

    assert run_requeue_unclaimed() == 2

    assert sorted(_sent(broker)) == sorted([
        ("worker.tasks.train_run", f"({lost.pk},)"), ("worker.tasks.train_run", f"({never.pk},)"),
    ])
    for run in (lost, never):
        run.refresh_from_db()
        assert run.sends == 2 and timezone.now() - run.sent_at < timedelta(seconds=10)
    assert list(RunEvent.objects.values_list("run_id", "kind").order_by("run_id")) == [
        (lost.pk, "requeued"), (never.pk, "requeued"),
    ]
    for run in (fresh, running, cancelled):
        before = (run.sent_at, run.sends)
        run.refresh_from_db()
        assert (run.sent_at, run.sends) == before
    # Idempotent: right after, there is nothing to send.
    assert run_requeue_unclaimed() == 0
    assert len(_sent(broker)) == 2


def test_the_interval_doubles_with_each_send(owner, broker, settings):
    settings.ENVLAB_REQUEUE_SECONDS = 100
    waiting = _run(owner, sent_ago=300, sends=3)  # third send: waits 400 s
    due = _run(owner, sent_ago=900, sends=9)  # capped at 8x: 800 s

    assert run_requeue_unclaimed() == 1

    assert _sent(broker) == [("worker.tasks.train_run", f"({due.pk},)")]
    waiting.refresh_from_db()
    assert waiting.sends == 3


def test_an_unreachable_broker_leaves_the_run_for_the_next_round(owner, settings):
    from webapp import celery_app

    settings.ENVLAB_REQUEUE_SECONDS = 180
    run = _run(owner, sent_ago=None)
    previous = celery_app.conf.broker_url
    # A port where nothing listens: the send fails the way it does with Redis stopped
    # (tests/runs/test_broker_outage.py stops a real one).
    from tests.envs.servers import free_port

    celery_app.conf.broker_url = f"redis://127.0.0.1:{free_port()}/0"
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    try:
        assert run_requeue_unclaimed() == 0
    finally:
        celery_app.conf.broker_url = previous
        celery_app._pool = None
        celery_app.amqp._producer_pool = None
    run.refresh_from_db()
    assert (run.status, run.sent_at, run.sends) == ("queued", None, 2)
    assert RunEvent.objects.count() == 0


def test_a_copy_of_the_message_finds_the_run_claimed_and_returns(owner, broker):
    from worker.tasks import train_run

    run = _run(owner, sent_ago=200)
    assert run_claim(run_id=run.pk, lease_owner="a", worker_name="w1", task_id="task-1").outcome == "claimed"

    result = train_run.apply(args=(run.pk,), task_id="task-2")

    assert result.get() == "duplicate"
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.worker_name, run.attempts, run.claim_task_id) == (
        "running", "a", "w1", 1, "task-1",
    )
    assert list(RunEvent.objects.filter(run=run).values_list("kind", flat=True)) == ["claimed"]


def test_only_the_claiming_message_waits_to_take_over(owner):
    run = _run(owner, sent_ago=0)
    run_claim(run_id=run.pk, lease_owner="a", worker_name="w1", task_id="task-1")

    redelivered = run_claim(run_id=run.pk, lease_owner="b", worker_name="w2", task_id="task-1")
    copy = run_claim(run_id=run.pk, lease_owner="c", worker_name="w3", task_id="task-2")

    assert (redelivered.outcome, copy.outcome) == ("busy", "duplicate")
    run.refresh_from_db()
    assert (run.lease_owner, run.attempts) == ("a", 1)
