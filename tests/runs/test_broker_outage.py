"""A launch while Redis is down (security review M4): the answer is 201, not a 500; the run
is queued with an event that says beat will send it; once Redis is back, beat's
`requeue_unclaimed_runs` sends it and a real worker claims it.

Real parts: a throwaway redis-server on a free port (stopped for the launch), the ASGI web
server and a Celery worker as processes pointed at it, the echo server, the test database.
The model is a stand-in folder: the worker claims the run and then fails to load it; the
claim is what this test is about (training itself is tested in tests/e2e).
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from celery import Celery

from tests.envs.servers import free_port
from tests.support.processes import Service, start_web, start_worker
from tests.support.redis_server import start_redis, stop_redis
from webapp.runs.models import Run, RunEvent

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _http(url: str, body: dict | None = None, token: str = "") -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode() if body is not None else None, method="POST" if body else "GET",
        headers={"Content-Type": "application/json", **({"Authorization": f"Token {token}"} if token else {})},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _web(port: int, redis_url: str) -> Service:
    return start_web(port, REDIS_URL=redis_url)


def _wait(predicate, timeout: float, what: str, service: Service):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen in {timeout:g} s:\n{service.log_text()[-4000:]}")
        time.sleep(0.5)
    return value


def _kinds(run_id: int) -> list[str]:
    return list(RunEvent.objects.filter(run_id=run_id).values_list("kind", flat=True))


def test_a_launch_while_redis_is_down_is_queued_and_sent_once_redis_is_back(
    owner, echo_env, settings, tmp_path
):
    settings.MODELS_DIR = tmp_path / "models"  # what the subprocesses get as ENVLAB_MODELS_DIR
    (settings.MODELS_DIR / "echo").mkdir(parents=True)
    (settings.MODELS_DIR / "echo" / "config.json").write_text("{}")
    env = echo_env  # tests/fixtures/catalog.py
    redis_port = free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    start_redis(redis_port)
    web_port = free_port()
    web = worker = None
    try:
        web = _web(web_port, redis_url)
        base = f"http://127.0.0.1:{web_port}"
        status, body = _http(f"{base}/api/auth/token/", {"username": "owner", "password": "owner-pw"})
        assert status == 200, body
        token = body["token"]

        stop_redis(redis_port)
        asked = time.monotonic()
        status, body = _http(f"{base}/api/runs/", {
            "name": "outage", "model": "demo:echo",
            "environments": [{"environment": env.pk, "name": "echo", "prompt": "Echo 'hi'.", "rows": 8}],
            "grpo": {"num_generations": 4, "max_steps": 1, "per_device_train_batch_size": 4},
        }, token=token)
        answered = time.monotonic() - asked

        assert status == 201, body
        assert answered < 15
        run = Run.objects.get(pk=body["id"])
        assert (body["status"], run.status, run.sent_at, run.attempts) == ("queued", "queued", None, 0)
        assert list(RunEvent.objects.filter(run=run).values_list("kind", "message")) == [
            ("queued", "Run queued."),
            ("broker_unreachable", "Queued; the broker was unreachable, beat will re-send the run."),
        ]

        start_redis(redis_port)  # empty: the message was never sent
        worker = start_worker("worker-broker-outage", REDIS_URL=redis_url)
        time.sleep(2)
        assert Run.objects.get(pk=run.pk).status == "queued"  # nothing to deliver yet

        # What beat does every minute: send the task by name to the default queue.
        beat = Celery(broker=redis_url)
        beat.send_task("worker.tasks.requeue_unclaimed_runs", queue="default")
        beat.close()

        _wait(lambda: "claimed" in _kinds(run.pk), 120, "the run claimed", worker)
        done = _wait(
            lambda: Run.objects.filter(pk=run.pk, status__in=["failed", "succeeded"]).first(), 180,
            "the run to end", worker,
        )
        assert (done.attempts, done.sends) == (1, 2)
        assert _kinds(run.pk)[:4] == ["queued", "broker_unreachable", "requeued", "claimed"]
        assert done.status == "failed"  # the stand-in model folder cannot be loaded
    finally:
        if worker is not None:
            worker.stop()
        if web is not None:
            web.stop()
        stop_redis(redis_port)
