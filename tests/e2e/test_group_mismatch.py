"""Groups that start from different observations, end to end: two third-party classic servers
(tests/envs/thirdparty_draw.py), one whose reset ignores the seed, one whose first observation
is the seed's alone; real TRL training in a real Celery worker; the metric and the alert as
stored and as the API shows them."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import metric_steps, run_config, wait_status
from tests.envs.servers import run_env_server
from webapp.runs.models import MetricPoint, RunEvent

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false"}
STEPS = 2


@pytest.fixture(scope="module")
def draw_urls():
    with (
        run_env_server("tests.envs.thirdparty_draw:seeded_app", SERVER_ENV) as seeded,
        run_env_server("tests.envs.thirdparty_draw:unseeded_app", SERVER_ENV) as unseeded,
    ):
        yield {"seeded": seeded, "unseeded": unseeded}


def _launch(api, name: str, url: str) -> int:
    registered = api.post("/api/environments/", {"name": name, "base_url": url, "capacity": 16}, format="json")
    assert registered.status_code == 201, registered.json()
    # Two groups of two a step.
    config = run_config(
        registered.json()["id"], max_steps=STEPS, rows=8, num_generations=2, per_device_train_batch_size=4,
        max_completion_length=24, max_tool_calling_iterations=1, save_steps=50,
    )
    config["environments"][0].update(name=name, prompt="Guess the card with the guess tool.")
    config["rewards"] = [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}]
    launched = api.post("/api/runs/", config, format="json")
    assert launched.status_code == 201, launched.json()
    return int(launched.json()["id"])


def _mismatches(run_id: int) -> list[tuple[int, float]]:
    return list(
        MetricPoint.objects.filter(run_id=run_id, key="group_mismatch").order_by("step").values_list("step", "value")
    )


def test_a_reset_that_ignores_the_seed_raises_group_mismatch_and_one_that_honours_it_none(api, draw_urls, worker):
    unseeded_id = _launch(api, "unseeded", draw_urls["unseeded"])
    seeded_id = _launch(api, "seeded", draw_urls["seeded"])

    unseeded = wait_status(unseeded_id, ("succeeded", "failed"), 120, worker)
    seeded = wait_status(seeded_id, ("succeeded", "failed"), 120, worker)

    assert [(r.status, r.error, r.step) for r in (unseeded, seeded)] == [("succeeded", "", STEPS)] * 2
    # Every start of the unseeded server differs (a random table id): both groups, every step.
    assert _mismatches(unseeded_id) == [(1, 2.0), (2, 2.0)]
    assert metric_steps(unseeded_id, "group_mismatch_frac") == [1, 2]
    body = api.get(f"/api/runs/{unseeded_id}/").json()
    assert body["alerts"] == [{
        "kind": "group_mismatch", "step": 1, "active": True,
        "message": (
            "environment 'unseeded': its reset ignores the seed: GRPO's advantages compare different starts "
            "(2 of 2 groups at step 1 started from different observations); fix the start with the "
            "environment's reset options, or make the server's reset honour the seed."
        ),
    }]
    assert body["status_display"] == "succeeded, with warnings"
    assert "group_mismatch" in api.get(f"/api/runs/{unseeded_id}/metrics/keys/").json()["keys"]

    assert _mismatches(seeded_id) == [(1, 0.0), (2, 0.0)]
    assert api.get(f"/api/runs/{seeded_id}/").json()["alerts"] == []
    assert not RunEvent.objects.filter(run_id=seeded_id, kind="alert").exists()
