"""The SFT warm-up as a run stage (issue 8 item 3), with a real worker process, a real catch
and echo server (uvicorn) and real Redis.

A randomly initialised tiny Qwen3 with the demo tokenizer makes no valid tool call on Catch;
a warm-up from the solver's episodes, and one from a stored run's kept rollouts, each leave a
model (the run's checkpoint 0) that does. Slow: two SFT warm-ups of ~30 steps on 2 cores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from tests.e2e.helpers import (
    metric_steps,
    register_echo,
    register_lab_entry,
    run_config,
    wait_for,
    wait_status,
)
from tests.envs.servers import run_env_server
from tests.factories import RunFactory
from webapp.runs.checkpoints import warmup_model_dir
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent

# The two warm-ups and their runs wait up to 1,070 s in all, more than the default timeout.
pytestmark = [
    pytest.mark.e2e, pytest.mark.slow, pytest.mark.sqlite_pass, pytest.mark.django_db(transaction=True), pytest.mark.timeout(1500),
]

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "OPENENV_MODE": "simulation"}
BASE_MODEL = "demo:catch-random"
GRID = {"rows": 5, "columns": 3}
# Measured: 16 solver episodes x 16 epochs (32 steps, lr 5e-3) took the random model from 0
# to 15 of 16 well-formed first moves; 12 steps were not enough.
WARMUP = {"episodes": 16, "epochs": 16, "learning_rate": 5e-3, "per_device_train_batch_size": 8}
SFT_STEPS = 32
SAMPLES = 16
WELL_FORMED_AT_LEAST = 12
# The echo runs' short warm-up: a few solver episodes, one epoch.
ECHO_WARMUP = {"source": "solver", "episodes": 4, "epochs": 1, "per_device_train_batch_size": 2}


@pytest.fixture(scope="module")
def catch_url() -> Iterator[str]:
    with run_env_server("envs.catch.server:app", SERVER_ENV) as url:
        yield url


@pytest.fixture(scope="session")
def random_catch_base() -> Path:
    """A randomly initialised tiny Qwen3 with a demo tokenizer (trained here, also on rendered
    Catch episodes so grids tokenize compactly): it knows nothing, tool calls included. Built
    with worker/demo_model's helpers, which are read, not changed."""
    import torch

    from envs.catch.solver import CatchSolver
    from worker.demo_model.catch import catch_tool_schemas, play_catch
    from worker.demo_model.tokenizer import _bare_tokenizer, _wrap, train_tokenizer
    from worker.demo_model.training import RECIPES, new_model

    path = Path(settings.MODELS_DIR) / BASE_MODEL.removeprefix("demo:")
    if (path / "config.json").is_file():
        return path
    schemas = catch_tool_schemas()
    renderer = _wrap(_bare_tokenizer())
    texts = [
        renderer.apply_chat_template(
            play_catch(CatchSolver(), seed=s, **GRID)[0], tools=schemas, tokenize=False
        )
        for s in range(50)
    ]
    tokenizer = train_tokenizer(vocab_size=1024, seed=0, conversations=100, extra_texts=texts)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = new_model(RECIPES["catch-base"], tokenizer)
    staging = path.with_name(path.name + ".building")
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    staging.rename(path)
    return path


def well_formed_first_moves(path: Path) -> int:
    """Of SAMPLES fresh episodes, how many first moves greedy decoding makes a valid catch
    call, parsed with TRL's parser as GRPOTrainer parses it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from worker.demo_model.catch import measure_catch_calls

    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model.eval()
    rate = measure_catch_calls(model, tokenizer, samples=SAMPLES, temperature=None, seed=7, **GRID)
    return int(rate.well_formed)


def register_catch(api: Any, url: str) -> int:
    return register_lab_entry(api, "catch", url, capacity=8)


def catch_warmup_config(env_id: int, **warmup: Any) -> dict[str, Any]:
    return {
        "name": "catch-warmup",
        "model": BASE_MODEL,
        "environments": [
            {
                "environment": env_id,
                "name": "catch",
                "prompt": "Catch the ball: use move or stay.",
                "rows": 16,
                "reset": GRID,
            }
        ],
        "sft_warmup": {**WARMUP, **warmup},
        "grpo": None,
    }


def kinds(run_id: int) -> list[str]:
    return list(RunEvent.objects.filter(run_id=run_id).values_list("kind", flat=True))


def test_warmups_from_the_solver_and_from_kept_rollouts_teach_tool_calls(
    api, owner, catch_url, worker, random_catch_base
):
    assert well_formed_first_moves(random_catch_base) == 0
    env_id = register_catch(api, catch_url)

    # From the solver, cancelled mid-way once: a stopped warm-up leaves no model, resume redoes it.
    response = api.post("/api/runs/", catch_warmup_config(env_id, source="solver"), format="json")
    assert response.status_code == 201, response.json()
    solver_run = response.json()["id"]
    assert response.json()["phase"] == "warmup"
    wait_for(
        lambda: (
            len(metric_steps(solver_run, "sft/loss")) >= 2
            or not Run.objects.get(pk=solver_run).is_active
        ),
        240,
        "two SFT steps",
    )
    run = Run.objects.get(pk=solver_run)
    assert run.is_active, f"{run.status}: {run.error}\n{worker.log_text()[-4000:]}"
    assert api.post(f"/api/runs/{solver_run}/cancel/").status_code == 200
    run = wait_status(solver_run, ("cancelled", "failed", "succeeded"), 30, worker)
    assert (run.status, run.phase) == ("cancelled", "warmup")
    assert not warmup_model_dir(solver_run).exists()
    assert api.post(f"/api/runs/{solver_run}/resume/").status_code == 200
    run = wait_status(solver_run, ("succeeded", "failed", "cancelled"), 400, worker)
    assert run.status == "succeeded", run.error
    assert (run.phase, run.step, run.max_steps, run.checkpoint_step) == (
        "warmup",
        SFT_STEPS,
        SFT_STEPS,
        None,
    )
    assert metric_steps(solver_run, "sft/loss") == list(range(1, SFT_STEPS + 1))
    kept = MetricPoint.objects.get(run_id=solver_run, key="sft/episodes_kept", step=0).value
    assert kept == 16.0  # the catch solver always catches
    done = RunEvent.objects.filter(run_id=solver_run, kind="warmup_done").get()
    assert (done.data["episodes_seen"], done.data["episodes_kept"], done.data["steps"]) == (
        16,
        16,
        SFT_STEPS,
    )
    assert done.message == "SFT warm-up done: 16 episode(s) kept of 16."
    assert kinds(solver_run).count("phase") == 2  # one per attempt
    detail = api.get(f"/api/runs/{solver_run}/").json()
    assert detail["phase"] == "warmup"
    assert [(c["step"], c["phase"]) for c in detail["checkpoints"]] == [(0, "warmup")]
    assert well_formed_first_moves(warmup_model_dir(solver_run)) >= WELL_FORMED_AT_LEAST

    # From a stored run: its solver-played rollouts (reward 1) are kept, its failed ones
    # (reward -1, no tool call at all) are not.
    from envs.catch.solver import CatchSolver
    from worker.demo_model.catch import play_catch

    source = RunFactory(
        owner=owner, name="earlier", model=BASE_MODEL, max_steps=1, status="succeeded",
    )
    seq = 0
    for seed in range(100, 116):
        messages, caught = play_catch(
            CatchSolver(), seed=seed, prompt="Catch the ball: use move or stay.", **GRID
        )
        assert caught
        for reward, completion in (
            (1.0, messages[1:]),
            (-1.0, [{"role": "assistant", "content": "No."}]),
        ):
            seq += 1
            Rollout.objects.create(
                run=source,
                seq=seq,
                step=1,
                env="catch",
                prompt=messages[:1],
                messages=completion,
                reward=reward,
                rewards={"env_reward": reward},
            )
    config = catch_warmup_config(env_id, source="run", run=source.pk, episodes=16)
    response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    from_run = response.json()["id"]
    run = wait_status(from_run, ("succeeded", "failed", "cancelled"), 400, worker)
    assert run.status == "succeeded", run.error
    done = RunEvent.objects.filter(run_id=from_run, kind="warmup_done").get()
    assert (done.data["episodes_seen"], done.data["episodes_kept"]) == (16, 16)
    assert well_formed_first_moves(warmup_model_dir(from_run)) >= WELL_FORMED_AT_LEAST


def test_warmup_then_grpo_on_echo(api, owner, echo_url, worker):
    env_id = register_echo(api, echo_url)
    config = run_config(env_id, max_steps=2, save_steps=2)
    config["sft_warmup"] = ECHO_WARMUP
    response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    run_id = response.json()["id"]
    run = wait_status(run_id, ("succeeded", "failed", "cancelled"), 300, worker)
    assert run.status == "succeeded", run.error
    assert (run.phase, run.step, run.checkpoint_step, run.max_steps) == ("grpo", 2, 2, 2)
    phases = [e.data["phase"] for e in RunEvent.objects.filter(run_id=run_id, kind="phase")]
    assert phases == ["warmup", "grpo"]
    assert kinds(run_id).index("warmup_done") < kinds(run_id).index("succeeded")
    assert metric_steps(run_id, "sft/loss") == [1, 2]
    assert metric_steps(run_id, "reward") == [1, 2]
    detail = api.get(f"/api/runs/{run_id}/").json()
    assert detail["phase"] == "grpo"
    assert [(c["step"], c["phase"]) for c in detail["checkpoints"]] == [(0, "warmup"), (2, "grpo")]
    browser = Client()
    browser.force_login(owner)
    page = browser.get(f"/runs/{run_id}/").content.decode()
    assert '<dd id="run-phase" data-phase="grpo">GRPO</dd>' in page
    assert 'id="chart-sft-loss"' in page


def test_a_run_taken_over_during_grpo_keeps_its_warmup(api, echo_url, worker):
    """The worker's training process dies after GRPO's first checkpoint: the redelivered task
    takes the run over from that checkpoint without redoing the warm-up, whose model and
    `sft/*` points stay."""
    import os
    import signal

    from tests.support.processes import worker_child_pids

    env_id = register_echo(api, echo_url)
    config = run_config(env_id, max_steps=8, save_steps=2)
    config["sft_warmup"] = ECHO_WARMUP
    run_id = api.post("/api/runs/", config, format="json").json()["id"]
    wait_for(
        lambda: (lambda r: r.phase == "grpo" and (r.checkpoint_step or 0) >= 2 and r.step >= 3)(
            Run.objects.get(pk=run_id)
        ),
        300,
        "a GRPO checkpoint and a step past it",
    )
    [child] = worker_child_pids(worker)
    os.kill(child, signal.SIGKILL)
    run = wait_status(run_id, ("succeeded", "failed", "interrupted"), 300, worker)
    assert (run.status, run.phase, run.attempts) == ("succeeded", "grpo", 2), run.error
    assert "taken_over" in kinds(run_id)
    assert kinds(run_id).count("warmup_done") == 1
    phases = [e.data["phase"] for e in RunEvent.objects.filter(run_id=run_id, kind="phase")]
    assert phases == ["warmup", "grpo", "grpo"]
    assert metric_steps(run_id, "sft/loss") == [1, 2]
    assert metric_steps(run_id, "reward") == list(range(1, 9))
    assert (warmup_model_dir(run_id) / "config.json").is_file()
