"""A server that refuses a session mid-run teaches the catalog its limit: the worker stores it
on the Environment row, and the next launch whose batch is larger is refused at launch with
advice that works for that server.

The server is a real third-party OpenEnv server (uvicorn) that takes openenv's default of one
session; the refusal is its own, over the WebSocket, to the worker's generic adapter. The run
itself is not trained (minutes on a CPU): the failure path's two steps are called as the
runner calls them when training raises."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client
from django.urls import reverse

from envs.adapters import bind_adapter
from envs.adapters.base import EnvironmentAtCapacity
from tests.envs.servers import run_env_server
from tests.factories import EnvironmentFactory
from webapp.catalog.models import Environment
from webapp.runs.config import RunConfig
from webapp.runs.models import Run
from worker.capacity import run_learn_capacity
from worker.training.lifecycle import error_message

pytestmark = pytest.mark.django_db

SERVER_FIX = (
    "make the server take more: mark its environment class concurrency-safe "
    "(SUPPORTS_CONCURRENT_SESSIONS = True) and pass max_concurrent_envs to create_app, "
    "then measure its capacity again"
)


@pytest.fixture(scope="module")
def single_url() -> Iterator[str]:
    with run_env_server("tests.support.slow_sessions:one_session_app") as url:
        yield url



def _config(env_id: int) -> dict:
    # The smallest batch GRPO allows: two generations of one prompt.
    return {
        "name": "pair",
        "model": "demo:echo",
        "environments": [{"environment": env_id, "name": "single", "prompt": "Count to three.", "rows": 4}],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        "grpo": {"num_generations": 2, "max_steps": 2, "per_device_train_batch_size": 2},
    }


def test_a_refusal_is_learned_and_the_next_launch_is_refused_at_launch(api, owner, single_url, built_model):
    registered = api.post("/api/environments/", {"name": "single", "base_url": single_url}, format="json")
    assert registered.status_code == 201, registered.json()
    environment = Environment.objects.get(pk=registered.json()["id"])
    assert (environment.capacity, environment.metadata["style"]) == (None, "classic")
    # Nothing says the server takes one session: the launch goes ahead.
    launched = api.post("/api/runs/", _config(environment.pk), format="json")
    assert (launched.status_code, launched.json()["warnings"]) == (201, [])
    run = Run.objects.get()
    config = RunConfig.model_validate(run.config)
    # The adapter as the worker binds it for the run (worker/training/runner.py environment_factory).
    bound = bind_adapter(environment=environment, env_name="single", batch_size=config.grpo.generation_batch_size)
    first = bound()
    first.reset()
    try:
        with pytest.raises(EnvironmentAtCapacity) as refused:
            bound().reset()
    finally:
        first._close()
    refusal = refused.value
    message = (
        f"Environment 'single' at {single_url} refused a session (CAPACITY_REACHED): it takes 1 concurrent "
        "session, and the generation batch of 2 rollouts needs one each. A smaller batch cannot fit: "
        f"num_generations is at least 2, so the smallest generation batch is 2 rollouts; {SERVER_FIX}."
    )
    assert (str(refusal), refusal.capacity, refusal.env_name) == (message, 1, "single")

    # Training raises it through TRL; the runner's failure path stores the error and the limit.
    try:
        raise RuntimeError("generation failed") from refusal
    except RuntimeError as exc:
        error = error_message(exc)
        learned = run_learn_capacity(exc=exc, config=config, run_id=run.pk, step=3, phase="grpo")

    assert error == message  # envlab's own words, without the class path
    assert learned is True
    environment.refresh_from_db()
    assert environment.capacity == 1
    assert {k: environment.metadata[k] for k in ("capacity_source", "capacity_learned")} == {
        "capacity_source": "learned from a refusal",
        "capacity_learned": {"run": run.pk, "step": 3, "phase": "grpo"},
    }
    note = f"1 (learned when the server refused a session at step 3 of run {run.pk})"
    assert api.get(f"/api/environments/{environment.pk}/").json()["capacity_note"] == note
    page = Client()
    page.force_login(owner)
    content = page.get(reverse("environment-detail", args=[environment.pk])).content.decode()
    assert (
        '<dd id="environment-capacity">1 <span class="muted capacity-source">(learned when the server refused '
        f"a session at step 3 of run {run.pk})</span></dd>"
    ) in content
    # A re-probe keeps what was learned (it is not the server's to report).
    assert api.post(f"/api/environments/{environment.pk}/probe/").json()["capacity_note"] == note

    again = api.post("/api/runs/", _config(environment.pk), format="json")

    assert again.status_code == 400
    [refusal_at_launch] = again.json()["environments.0.environment"]
    assert refusal_at_launch == (
        f"environment 'single' takes 1 concurrent session (learned when the server refused a session at step 3 "
        f"of run {run.pk}), fewer than the generation batch of 2 rollouts (per_device_train_batch_size x "
        "gradient_accumulation_steps): a smaller batch cannot fit: num_generations is at least 2, so the "
        f"smallest generation batch is 2 rollouts; {SERVER_FIX}"
    )
    assert "envs.adapters" not in refusal_at_launch and "MAX_CONCURRENT_ENVS" not in refusal_at_launch
    assert list(Run.objects.values_list("pk", flat=True)) == [run.pk]  # the refusal wrote nothing


def test_a_refusal_that_states_no_limit_changes_no_row(owner):
    environment = EnvironmentFactory(
        owner=owner, name="quiet", capacity=8, metadata={"capacity_source": "declared"},
    )
    config = RunConfig.model_validate(_config(environment.pk))

    learned = run_learn_capacity(
        exc=EnvironmentAtCapacity("full", capacity=None, env_name="single"), config=config, run_id=1, step=1,
        phase="grpo",
    )

    assert learned is False
    environment.refresh_from_db()
    assert (environment.capacity, environment.metadata) == (8, {"capacity_source": "declared"})


def test_other_errors_keep_their_type_in_the_runs_error():
    assert error_message(ValueError("bad row")) == "ValueError: bad row"
