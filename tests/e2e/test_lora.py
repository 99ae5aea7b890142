"""LoRA runs (issue 20, item 3) through a real Celery worker on the test variant of the demo model:
the checkpoints hold the adapter alone, a cancelled run resumes from one, and an evaluation of
`{"run": id, "checkpoint": "last"}` loads the base model with the adapter merged in and plays."""

from __future__ import annotations

import json

import pytest

from tests.e2e.helpers import metric_steps, register_echo, run_config, wait_for, wait_status
from webapp.runs.checkpoints import run_checkpoints, run_dir
from webapp.runs.models import Run, RunEvent

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.sqlite_pass, pytest.mark.django_db(transaction=True)]

# Long enough that the cancel sent after the first checkpoint lands before the last step.
MAX_STEPS = 8


def test_a_lora_run_saves_adapters_resumes_from_one_and_an_evaluation_plays_it(
    api, owner_client, echo_url, worker
):
    env_id = register_echo(api, echo_url)
    config = run_config(env_id, max_steps=MAX_STEPS, save_steps=2)
    config["peft"] = {"r": 4, "lora_alpha": 8, "target_modules": "all-linear"}
    launched = api.post("/api/runs/", config, format="json")
    assert launched.status_code == 201, launched.json()
    run_id = launched.json()["id"]

    # Cancelled once its first checkpoint (an adapter) is stored, then resumed from it.
    wait_for(lambda: (Run.objects.get(pk=run_id).checkpoint_step or 0) >= 2, 300, "the first checkpoint")
    assert api.post(f"/api/runs/{run_id}/cancel/").status_code == 200
    run = wait_status(run_id, ("cancelled", "failed", "succeeded"), 120, worker)
    assert run.status == "cancelled", run.error
    stopped_at = run.checkpoint_step
    assert stopped_at is not None and stopped_at < MAX_STEPS
    assert api.post(f"/api/runs/{run_id}/resume/").status_code == 200
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert run.status == "succeeded", run.error
    assert metric_steps(run_id, "reward") == list(range(1, MAX_STEPS + 1))
    [resumed] = RunEvent.objects.filter(run_id=run_id, kind="resumed")
    assert resumed.data["checkpoint_step"] == stopped_at

    checkpoints = run_checkpoints(run=run)
    assert [c.step for c in checkpoints][-1] == MAX_STEPS and all(c.adapter for c in checkpoints)
    last = run_dir(run_id) / f"checkpoint-{MAX_STEPS}"
    names = {p.name for p in last.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= names
    assert not names & {"model.safetensors", "pytorch_model.bin", "config.json"}  # no full weights
    adapter = json.loads((last / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"], adapter["peft_type"]) == (4, 8, "LORA")
    # The trainer went on from the stored state: its history still has the steps before the cancel.
    state = json.loads((last / "trainer_state.json").read_text())
    assert state["global_step"] == MAX_STEPS
    assert {entry["step"] for entry in state["log_history"] if "loss" in entry} >= set(range(1, stopped_at + 1))

    detail = api.get(f"/api/runs/{run_id}/").json()
    assert {c["step"]: c["adapter"] for c in detail["checkpoints"]}[MAX_STEPS] is True
    page = owner_client.get(f"/runs/{run_id}/")
    assert page.status_code == 200 and b"LoRA r=4" in page.content and b"LoRA adapter" in page.content

    evaluation = api.post(
        "/api/evaluations/",
        {"environment": env_id, "models": [{"run": run_id, "checkpoint": "last"}], "episodes": 2, "seed": 3,
         "max_completion_length": 48, "max_tool_calling_iterations": 2},
        format="json",
    )
    assert evaluation.status_code == 201, evaluation.json()

    def finished() -> dict | None:
        body = api.get(f"/api/evaluations/{evaluation.json()['id']}/").json()
        return body if body["status"] not in ("queued", "running") else None

    body = wait_for(finished, 240, "the evaluation")
    assert (body["status"], body["error"]) == ("succeeded", ""), body
    assert [row["episodes"] for row in body["results"]] == [2]


def _adapter_weights(folder) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def test_a_lora_warm_up_trains_the_adapter_that_grpo_continues(api, echo_url, worker):
    import torch

    env_id = register_echo(api, echo_url)
    # GRPO at a vanishing learning rate: its adapter stays the warm-up's, which a new adapter
    # (lora_B initialised to zero) could not be.
    config = run_config(env_id, max_steps=2, save_steps=2, learning_rate=1e-12)
    config["peft"] = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": "all-linear"}
    config["sft_warmup"] = {"source": "solver", "episodes": 4, "epochs": 2, "learning_rate": 5e-3,
                            "per_device_train_batch_size": 4}
    launched = api.post("/api/runs/", config, format="json")
    assert launched.status_code == 201, launched.json()
    run_id = launched.json()["id"]
    run = wait_status(run_id, ("succeeded", "failed", "cancelled"), 600, worker)
    assert run.status == "succeeded", run.error

    checkpoints = run_checkpoints(run=run)
    assert [(c.step, c.phase, c.adapter) for c in checkpoints] == [(0, "warmup", True), (2, "grpo", True)]
    warm_dir, grpo_dir = checkpoints[0].path, checkpoints[1].path
    for folder in (warm_dir, grpo_dir):
        names = {p.name for p in folder.iterdir()}
        assert "adapter_config.json" in names and not names & {"model.safetensors", "config.json"}
    warm, grpo = _adapter_weights(warm_dir), _adapter_weights(grpo_dir)
    assert warm.keys() == grpo.keys() and any("lora_B" in key for key in warm)
    assert all(warm[key].abs().max() > 1e-4 for key in warm if "lora_B" in key)  # the warm-up trained it
    assert all(torch.allclose(warm[key], grpo[key], atol=1e-6) for key in warm)  # GRPO went on from it
    # Both phases' checkpoints name the same base model, the run's.
    bases = {json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"]
             for folder in (warm_dir, grpo_dir)}
    assert len(bases) == 1 and bases.pop().endswith("echo")

    # A LoRA run from that adapter continues it: another shape is refused, and nothing is written.
    runs_before = Run.objects.count()
    other = run_config(env_id, max_steps=2)
    other["model"] = {"run": run_id, "checkpoint": "last"}
    other["peft"] = {"r": 8, "lora_alpha": 8}
    refused = api.post("/api/runs/", other, format="json")
    assert refused.status_code == 400, refused.json()
    assert list(refused.json()) == ["peft"] and "r=4, lora_alpha=8" in refused.json()["peft"][0]
    assert Run.objects.count() == runs_before
