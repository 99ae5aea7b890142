"""External runs over the API (webapp/runs/external.py): POST /api/runs/external/ makes a running
run with no task; POST /api/runs/<id>/log/ stores a step through the worker's write path (seq,
a step logged again replaces its values); POST /api/runs/<id>/finish/ ends it. Owner only; a
viewer (runs.view_run) is refused, an outsider does not see the run; a refused body writes nothing."""

from __future__ import annotations

import json

import pytest

from tests.factories import RunFactory
from tests.fixtures.accounts import grant, token_client
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent, RunTag

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer_api(django_user_model):
    """A teammate who may see every run (runs.view_run) but changes none."""
    return token_client(grant(django_user_model.objects.create_user("viewer"), "runs.view_run"))


def _create(api, **body):
    response = api.post("/api/runs/external/", {"name": "my trl run", **body}, format="json")
    assert response.status_code == 201, response.json()
    return Run.objects.get(pk=response.json()["id"])


def _log(api, run, body):
    return api.post(f"/api/runs/{run.pk}/log/", json.dumps(body), content_type="application/json")


ROLLOUT = {
    "prompt": [{"role": "user", "content": "say hi"}],
    "messages": [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "greet", "arguments": "{}"}}]},
        {"role": "tool", "name": "greet", "content": "hi"},
        {"role": "assistant", "content": "hi"},
    ],
    "rewards": {"exact": 1.0, "brevity": None},
    "reward": 1.0,
    "advantage": 0.5,
}


def test_create_makes_a_running_run_with_no_task(api, owner):
    config = {"learning_rate": 1e-5, "num_generations": 4, "nested": {"a": [1, "x", None]}}

    response = api.post(
        "/api/runs/external/",
        {"name": "my trl run", "config": config, "tags": ["trl", "seed-0"], "model": "Qwen/Qwen3-0.6B", "max_steps": 3},
        format="json",
    )

    assert response.status_code == 201
    body = response.json()
    run = Run.objects.get(pk=body["id"])
    assert (body["name"], body["status"], body["external"], body["config"], body["tags"], body["model"]) == (
        "my trl run", "running", True, config, ["seed-0", "trl"], "Qwen/Qwen3-0.6B",
    )
    assert (run.owner, run.external, run.status, run.config, run.max_steps, run.attempts) == (
        owner, True, "running", config, 3, 1,
    )
    assert run.lease_owner and run.lease_owner not in response.content.decode()
    assert run.heartbeat_at is not None and run.started_at is not None
    assert list(RunEvent.objects.filter(run=run).values_list("kind", flat=True)) == ["external_started"]
    assert body["resumable"] is False


def test_create_without_config_stores_an_empty_one(api):
    run = _create(api)

    assert (run.config, run.model, run.max_steps, list(run.tags.all())) == ({}, "", 0, [])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "a\nb"}, "name"),
        ({"name": "x" * 121}, "name"),
        ({"name": "r", "config": [1, 2]}, "config"),
        ({"name": "r", "config": {"environments": [{"environment": 1}]}}, "config"),
        ({"name": "r", "config": {"blob": "x" * 70_000}}, "config"),
        ({"name": "r", "config": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {}}}}}}}}}}, "config"),
        ({"name": "r", "tags": ["Not A Slug"]}, "tags"),
        ({"name": "r", "max_steps": -1}, "max_steps"),
        ({"name": "r", "max_steps": True}, "max_steps"),
        ({"name": "r", "queue": "gpu"}, "non_field_errors"),
    ],
)
def test_create_refuses_a_bad_body_and_writes_nothing(api, body, field):
    response = api.post("/api/runs/external/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert (Run.objects.count(), RunTag.objects.count(), RunEvent.objects.count()) == (0, 0, 0)


def test_create_refuses_a_non_finite_config_number(api):
    response = api.post(
        "/api/runs/external/", '{"name": "r", "config": {"lr": 1e400}}', content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json() == {"config": ["numbers must be finite (no NaN or infinity)"]}
    assert Run.objects.count() == 0


def test_log_stores_metrics_and_rollouts_as_the_worker_does(api):
    run = _create(api)

    response = _log(api, run, {"step": 1, "metrics": {"loss": 0.25, "rewards/exact/mean": 1, "lr": 1e-5}, "rollouts": [ROLLOUT, ROLLOUT]})

    assert response.status_code == 200
    assert response.json() == {"seq": 3, "step": 1, "rollouts": 2}
    points = {(p.step, p.key): (p.value, p.seq) for p in MetricPoint.objects.filter(run=run)}
    assert points == {
        (1, "loss"): (0.25, 1), (1, "rewards/exact/mean"): (1.0, 1), (1, "lr"): (1e-5, 1),
    }
    rollouts = list(Rollout.objects.filter(run=run).order_by("seq"))
    assert [(r.seq, r.step, r.rewards, r.reward, r.advantage) for r in rollouts] == [
        (2, 1, {"exact": 1.0, "brevity": None}, 1.0, 0.5), (3, 1, {"exact": 1.0, "brevity": None}, 1.0, 0.5),
    ]
    assert rollouts[0].messages == ROLLOUT["messages"]
    assert rollouts[0].tools == {"greet": {"calls": 1, "failures": 0}}
    run_before = run.heartbeat_at
    run.refresh_from_db()
    assert (run.step, run.last_seq, run.status) == (1, 3, "running")
    assert run.heartbeat_at >= run_before


def test_a_step_logged_again_replaces_its_values(api):
    run = _create(api)
    assert _log(api, run, {"step": 2, "metrics": {"loss": 1.0, "reward": 0.5}}).status_code == 200

    response = _log(api, run, {"step": 2, "metrics": {"loss": 0.5}})

    assert response.json() == {"seq": 2, "step": 2, "rollouts": 0}
    points = {(p.step, p.key): (p.value, p.seq) for p in MetricPoint.objects.filter(run=run)}
    assert points == {(2, "loss"): (0.5, 2), (2, "reward"): (0.5, 1)}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"metrics": {"loss": 1}}', "step"),
        ('{"step": -1, "metrics": {"loss": 1}}', "step"),
        ('{"step": 1.5, "metrics": {"loss": 1}}', "step"),
        ('{"step": 1, "metrics": {}}', "metrics"),
        ('{"step": 1, "metrics": {"loss": "low"}}', "metrics"),
        ('{"step": 1, "metrics": {"loss": 1e400}}', "metrics"),
        ('{"step": 1, "metrics": {"loss": true}}', "metrics"),
        ('{"step": 1, "metrics": {"' + "k" * 201 + '": 1}}', "metrics"),
        ('{"step": 1, "metrics": {"a\\u0001": 1}}', "metrics"),
        ('{"step": 1, "metrics": {' + ", ".join(f'"k{i}": 1' for i in range(501)) + "}}", "metrics"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": {"a": 1}}', "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [{"rewards": {"t": "x"}}]}', "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [{"messages": ["hi"]}]}', "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [{"lost": true}]}', "rollouts"),
        # What the rollouts API's schema promises readers of a transcript (TranscriptMessageOut).
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [{"messages": [{"role": "user", "content": 5}]}]}', "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [{"messages": [{"role": "user", "content": [1]}]}]}',
         "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [{"prompt": [{"role": "user", "name": 1}]}]}', "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [{"messages": [{"role": "assistant", "tool_calls": '
         '[{"type": "function"}]}]}]}', "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [{"messages": [{"role": "assistant", "tool_calls": '
         '[{"function": {"name": "f", "arguments": 3}}]}]}]}', "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [{"reward": 1e400}]}', "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [' + ",".join(["{}"] * 257) + "]}", "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "rollouts": [{"messages": [{"role": "user", "content": "'
         + "x" * 300_000 + '"}]}]}', "rollouts"),
        ('{"step": 1, "metrics": {"loss": 1}, "extra": 1}', "non_field_errors"),
        ("[1, 2]", "non_field_errors"),
    ],
)
def test_log_refuses_a_bad_body_and_writes_nothing(api, raw, field):
    run = _create(api)

    response = api.post(f"/api/runs/{run.pk}/log/", raw, content_type="application/json")

    assert response.status_code == 400
    assert field in response.json()
    assert (MetricPoint.objects.count(), Rollout.objects.count()) == (0, 0)
    run.refresh_from_db()
    assert (run.last_seq, run.step) == (0, 0)


def test_log_refuses_nan_as_json_does(api):
    run = _create(api)

    response = api.post(f"/api/runs/{run.pk}/log/", '{"step": 1, "metrics": {"loss": NaN}}', content_type="application/json")

    assert response.status_code == 400
    assert MetricPoint.objects.count() == 0


def test_only_the_owner_logs_and_finishes(api, viewer_api, outsider_api):
    run = _create(api)

    answers = [
        viewer_api.post(f"/api/runs/{run.pk}/log/", {"step": 1, "metrics": {"loss": 1}}, format="json").status_code,
        outsider_api.post(f"/api/runs/{run.pk}/log/", {"step": 1, "metrics": {"loss": 1}}, format="json").status_code,
        viewer_api.post(f"/api/runs/{run.pk}/finish/", {}, format="json").status_code,
        outsider_api.post(f"/api/runs/{run.pk}/finish/", {}, format="json").status_code,
        viewer_api.get(f"/api/runs/{run.pk}/").status_code,
    ]

    assert answers == [403, 404, 403, 404, 200]
    run.refresh_from_db()
    assert (run.status, run.last_seq, MetricPoint.objects.count()) == ("running", 0, 0)


def test_the_labs_own_runs_take_no_logs_and_no_finish(api, owner):
    run = RunFactory(owner=owner, status=Run.Status.RUNNING, lease_owner="worker-lease")

    logged = api.post(f"/api/runs/{run.pk}/log/", {"step": 1, "metrics": {"loss": 1}}, format="json")
    finished = api.post(f"/api/runs/{run.pk}/finish/", {}, format="json")

    assert (logged.status_code, finished.status_code) == (409, 409)
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.last_seq, MetricPoint.objects.count()) == ("running", "worker-lease", 0, 0)


def test_finish_ends_the_run_once(api):
    run = _create(api)
    _log(api, run, {"step": 3, "metrics": {"loss": 0.1}})

    first = api.post(f"/api/runs/{run.pk}/finish/", {}, format="json")
    second = api.post(f"/api/runs/{run.pk}/finish/", {"status": "failed"}, format="json")
    late_log = _log(api, run, {"step": 4, "metrics": {"loss": 0.0}})

    assert first.status_code == 200
    assert (first.json()["status"], first.json()["step"]) == ("succeeded", 3)
    assert (second.status_code, second.json()) == (409, {"detail": "the run has already ended (succeeded)"})
    assert (late_log.status_code, late_log.json()) == (409, {"detail": "the run has ended (succeeded): it takes no more logs"})
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.failure, run.last_seq) == ("succeeded", "", "", 1)
    assert run.finished_at is not None
    assert list(MetricPoint.objects.filter(run=run).values_list("step", "key")) == [(3, "loss")]
    assert list(RunEvent.objects.filter(run=run).values_list("kind", flat=True)) == ["external_started", "succeeded"]


def test_finish_failed_keeps_the_error(api):
    run = _create(api)

    response = api.post(f"/api/runs/{run.pk}/finish/", {"status": "failed", "error": "CUDA OOM"}, format="json")

    assert response.status_code == 200
    run.refresh_from_db()
    assert (run.status, run.error, run.failure) == ("failed", "CUDA OOM", "error")


@pytest.mark.parametrize(
    ("body", "field"),
    [({"status": "cancelled"}, "status"), ({"error": 5}, "error"), ({"why": "x"}, "non_field_errors")],
)
def test_finish_refuses_a_bad_body_and_ends_nothing(api, body, field):
    run = _create(api)

    response = api.post(f"/api/runs/{run.pk}/finish/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    run.refresh_from_db()
    assert (run.status, run.finished_at, RunEvent.objects.filter(run=run).count()) == ("running", None, 1)


def test_cancel_ends_an_external_run_now_and_its_logs_are_refused(api):
    run = _create(api)

    cancelled = api.post(f"/api/runs/{run.pk}/cancel/")
    logged = _log(api, run, {"step": 1, "metrics": {"loss": 1}})
    resumed = api.post(f"/api/runs/{run.pk}/resume/", {}, format="json")

    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "cancelled")
    assert logged.status_code == 409
    assert (resumed.status_code, resumed.json()) == (
        409, {"detail": "an external run trains in its own script: start the script again, as a new run"}
    )
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.last_seq) == ("cancelled", "", 0)


def test_the_run_page_and_reads_show_an_external_run(api, owner_client):
    run = _create(api, config={"learning_rate": 1e-5, "rewards": "not the lab's", "alerts": 3})
    _log(api, run, {"step": 1, "metrics": {"loss": 0.5, "reward": 1.0}, "rollouts": [ROLLOUT]})

    page = owner_client.get(f"/runs/{run.pk}/")
    answers = [
        api.get(f"/api/runs/{run.pk}/{path}").status_code
        for path in ("", "metrics/?key=loss", "metrics/keys/", "rollouts/", "events/", "tools/", "prompts/",
                     "rollouts/export/?format=jsonl", "metrics/export/?format=csv")
    ]

    assert page.status_code == 200
    assert "my trl run" in page.content.decode()
    assert '<dd id="run-worker">outside the lab (external run)</dd>' in page.content.decode()
    assert answers == [200] * 9
    assert api.get(f"/api/runs/{run.pk}/metrics/?key=loss").json() == {"series": {"loss": [[1, 0.5]]}}


def test_health_rules_over_metrics_raise_and_clear_alerts_once(api):
    run = _create(api, config={"alerts": {"zero_variance_steps": 2}})

    for step, frac in ((1, 1.0), (2, 1.0), (2, 1.0), (3, 0.0)):  # step 2 logged twice
        assert _log(api, run, {"step": step, "metrics": {"frac_reward_zero_std": frac, "loss": 0.1}}).status_code == 200

    alerts = list(RunEvent.objects.filter(run=run, kind="alert").order_by("pk").values_list("data", "message"))
    assert [data for data, _ in alerts] == [
        {"alert": "zero_variance", "step": 2, "active": True},
        {"alert": "zero_variance", "step": 3, "active": False},
    ]
    assert alerts[0][1].startswith("100% of groups had the same reward for every completion over the last 2 steps")
    shown = api.get(f"/api/runs/{run.pk}/").json()["alerts"]
    assert [(a["kind"], a["step"], a["active"]) for a in shown] == [("zero_variance", 2, False)]  # cleared


def test_an_external_run_with_default_alert_settings_raises_entropy_collapse(api):
    run = _create(api, config={"learning_rate": 1e-5})

    for step in range(1, 6):
        _log(api, run, {"step": step, "metrics": {"entropy": 0.001}})

    body = api.get(f"/api/runs/{run.pk}/").json()
    assert [(a["kind"], a["step"], a["active"]) for a in body["alerts"]] == [("entropy_collapse", 5, True)]
    assert run.events.filter(kind="alert").count() == 1
