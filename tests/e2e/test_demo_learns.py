"""The one-click demo learns: a real worker trains the demo config (30 GRPO steps, seed 0)
against the real echo server, starting from the real "demo" build, and the reward climbs.

Slow (a 2-minute build, cached in the test models folder across sessions, and a 1-2 minute
run): `make test` runs it on one database only (scripts/run_tests.py)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from django.conf import settings

from tests.e2e.helpers import metric_steps, register_echo, wait_status
from webapp.runs.demo import demo_config
from webapp.runs.models import MetricPoint, Run, RunEvent

# The 30-step demo run may take its whole 900 s wait, more than the default timeout allows.
pytestmark = [
    pytest.mark.e2e, pytest.mark.slow, pytest.mark.sqlite_pass, pytest.mark.django_db(transaction=True), pytest.mark.timeout(1200),
]

# The e2e suite's `demo:echo` is the fast "test" variant; the demo build gets its own name.
LEARNING_MODEL = "demo:echo-learns"
FIRST_STEPS_AT_MOST = 0.6
LAST_STEPS_AT_LEAST = 0.9
UNSEEN_CALL_RATE_AT_LEAST = 0.8


@pytest.fixture(scope="session")
def learning_demo_model() -> Path:
    """The "demo" build, rebuilt when its recipe changed since the cached one."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from worker.demo_model import build_demo_model, demo_model_path, is_built, read_manifest
    from worker.demo_model.training import RECIPES

    path = demo_model_path(LEARNING_MODEL, settings.MODELS_DIR)
    wanted = dataclasses.asdict(RECIPES["demo"])
    if not is_built(path) or read_manifest(path).get("recipe") != wanted:
        build_demo_model(path, variant="demo", seed=0)
    return path


def _reward_by_step(run_id: int) -> dict[int, float]:
    return dict(
        MetricPoint.objects.filter(run_id=run_id, key="reward").values_list("step", "value")
    )


def test_the_demo_reward_climbs_from_weak_to_reliable(
    api, echo_url, worker, learning_demo_model
):
    env_id = register_echo(api, echo_url)
    config = demo_config(env_id, model=LEARNING_MODEL)
    assert config == {**demo_config(env_id), "model": LEARNING_MODEL}
    assert (config["grpo"]["max_steps"], config["grpo"].get("seed", 0)) == (30, 0)

    response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    run = wait_status(response.json()["id"], ("succeeded", "failed"), 900, worker)

    assert (run.status, run.error, run.step) == ("succeeded", "", 30)
    assert metric_steps(run.pk, "reward") == list(range(1, 31))
    rewards = _reward_by_step(run.pk)
    first = sum(rewards[s] for s in (1, 2, 3)) / 3
    last = sum(rewards[s] for s in (28, 29, 30)) / 3
    curve = [round(rewards[s], 3) for s in range(1, 31)]
    finished = RunEvent.objects.get(run=run, kind=Run.Status.SUCCEEDED)
    print(f"demo reward: first 3 {first:.3f}, last 3 {last:.3f}, "
          f"train {finished.data.get('train_seconds')} s, curve {curve}")
    assert first <= FIRST_STEPS_AT_MOST, curve
    assert last >= LAST_STEPS_AT_LEAST, curve


def test_the_demo_model_calls_the_tool_on_wordings_it_never_saw(learning_demo_model):
    """Sampled at temperature 1 and parsed with TRL's own parser, as GRPO does."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from worker.demo_model.conversations import TRAINING_WORDINGS, UNSEEN_WORDINGS
    from worker.demo_model.evaluation import measure_tool_calls

    assert not set(UNSEEN_WORDINGS) & set(TRAINING_WORDINGS)
    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(learning_demo_model, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(learning_demo_model, local_files_only=True)

    rates = {
        wording: measure_tool_calls(
            model.eval(), tokenizer, samples=16, temperature=1.0, seed=99,
            wordings=(wording,), max_words=5,
        ).tool_call_rate
        for wording in UNSEEN_WORDINGS
    }

    overall = sum(rates.values()) / len(rates)
    assert overall >= UNSEEN_CALL_RATE_AT_LEAST, rates
    # No wording is a blind spot either.
    assert min(rates.values()) >= 0.5, rates
