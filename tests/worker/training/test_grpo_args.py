"""The run config becomes GRPOConfig field by field (no GPU needed: GRPOConfig only records
the vLLM settings; the trainer is what would load vLLM)."""

from __future__ import annotations

import dataclasses
import os
import typing
from typing import Any

import pytest
from transformers.trainer_utils import SchedulerType
from trl import GRPOConfig

from webapp.runs.config import VLLM_PASSTHROUGH, GRPOSettings, RunConfigError, parse_run_config
from webapp.runs.grpo_fields import TRL_PASSTHROUGH, TRLTrainingFields
from worker.training.grpo_args import LAB_CONSTANTS, LAB_DEFAULTS, grpo_config_kwargs

BASE = {"name": "t", "model": "demo:echo", "environments": [{"environment": 1, "prompt": "p"}]}
GRPO = {
    "num_generations": 8, "max_steps": 7, "learning_rate": 3e-6, "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 2, "max_completion_length": 512, "max_tool_calling_iterations": 6,
    "beta": 0.04, "temperature": 0.7, "seed": 11, "save_steps": 3, "chat_template_kwargs": {"enable_thinking": True},
}


def test_every_grpo_setting_is_a_grpo_config_field_of_the_same_name():
    fields = {field.name for field in dataclasses.fields(GRPOConfig)}
    assert set(GRPOSettings.model_fields) - fields == set()
    assert set(VLLM_PASSTHROUGH) - fields == set()
    assert set(LAB_CONSTANTS) - fields == set()


def test_cpu_config_translates_field_by_field(tmp_path):
    config = parse_run_config({**BASE, "grpo": GRPO})
    kwargs = grpo_config_kwargs(config, output_dir=str(tmp_path), reward_weights=[1.0, 0.1])
    # As before the TRL allowlist: bf16 and activation checkpointing off, nothing else TRL's.
    assert kwargs == {
        "output_dir": str(tmp_path), **GRPO, "reward_weights": [1.0, 0.1], "use_cpu": True, "use_vllm": False,
        "bf16": False, "activation_checkpointing": False, **LAB_CONSTANTS, "report_to": "none",
    }
    args = GRPOConfig(**kwargs)
    assert [getattr(args, name) for name in GRPO] == list(GRPO.values())
    assert (args.use_vllm, args.use_cpu, args.logging_steps) == (False, True, 1)


def test_vllm_fields_pass_through_when_set(tmp_path):
    generation = {
        "backend": "vllm", "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.4,
        "vllm_importance_sampling_mode": "token_truncate", "vllm_importance_sampling_clip_max": 2.0,
        "vllm_enable_sleep_mode": True, "vllm_tensor_parallel_size": 2,
    }
    config = parse_run_config({**BASE, "device": "cuda", "gpus": 2, "generation": generation})
    kwargs = grpo_config_kwargs(config, output_dir=str(tmp_path), reward_weights=[1.0])
    vllm = {key: value for key, value in kwargs.items() if key.startswith(("vllm", "use_"))}
    assert vllm == {
        "use_vllm": True, "use_cpu": False, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.4,
        "vllm_importance_sampling_mode": "token_truncate", "vllm_importance_sampling_clip_max": 2.0,
        "vllm_enable_sleep_mode": True, "vllm_tensor_parallel_size": 2,
    }


def test_a_managed_server_gets_the_address_the_worker_started_it_at(tmp_path):
    config = parse_run_config({**BASE, "device": "cuda", "generation": {"backend": "vllm", "vllm_mode": "server"}})
    assert config.generation.managed_server
    kwargs = grpo_config_kwargs(
        config, output_dir=str(tmp_path), reward_weights=[1.0], vllm_server_base_url="http://127.0.0.1:8123"
    )
    assert (kwargs["vllm_mode"], kwargs["vllm_server_base_url"]) == ("server", "http://127.0.0.1:8123")


@pytest.mark.parametrize(
    ("generation", "errors"),
    [
        ({"vllm_gpu_memory_utilization": 0.5}, {"generation.vllm_gpu_memory_utilization": [
            "vllm_gpu_memory_utilization apply to the vllm backend only"]}),
        ({"backend": "vllm", "vllm_server_base_url": "http://example.com:8000"}, {"generation.vllm_server_base_url": [
            "a server URL needs vllm_mode 'server'"]}),
        ({"backend": "vllm", "vllm_importance_sampling_mode": "all"}, {"generation.vllm_importance_sampling_mode": [
            "Input should be 'token_truncate', 'token_mask', 'sequence_truncate' or 'sequence_mask'"]}),
        ({"backend": "vllm", "vllm_gpu_memory_utilization": 1.5}, {"generation.vllm_gpu_memory_utilization": [
            "Input should be less than or equal to 0.95"]}),
    ],
)
def test_vllm_fields_are_checked(generation, errors):
    with pytest.raises(RunConfigError) as caught:
        parse_run_config({**BASE, "device": "cuda", "generation": generation})
    assert caught.value.errors == errors


# A value other than TRL's default for every allowlisted field (the test checks it differs).
TRL_VALUES: dict[str, Any] = {
    "loss_type": "dr_grpo", "epsilon": 0.3, "epsilon_high": 0.28, "delta": 1.5, "scale_rewards": "batch",
    "num_iterations": 2, "importance_sampling_level": "sequence", "mask_truncated_completions": True,
    "top_p": 0.9, "top_k": 50, "min_p": 0.05, "repetition_penalty": 1.1, "lr_scheduler_type": "cosine",
    "warmup_steps": 3, "weight_decay": 0.01, "max_grad_norm": 0.5, "bf16": True, "gradient_checkpointing": True,
    "multi_objective_aggregation": "normalize_then_sum", "top_entropy_quantile": 0.2, "entropy_coef": 0.01,
}
TRL_NAMES = {"gradient_checkpointing": "activation_checkpointing"}  # transformers 5's name


def test_the_allowlist_is_a_subset_of_the_installed_grpo_config():
    fields = {field.name: field for field in dataclasses.fields(GRPOConfig)}
    assert set(TRL_PASSTHROUGH) - set(fields) == set()
    assert set(TRL_VALUES) == set(TRL_PASSTHROUGH)
    # transformers 5 has no warmup_ratio (warmup_steps below 1 is the ratio): not allowlisted.
    assert "warmup_ratio" not in fields and "warmup_ratio" not in TRL_PASSTHROUGH
    # The schedules offered are transformers' own names.
    schedules = typing.get_args(typing.get_args(TRLTrainingFields.model_fields["lr_scheduler_type"].annotation)[0])
    assert set(schedules) <= {s.value for s in SchedulerType}
    # The loss types offered are the ones TRL's help names.
    for loss in typing.get_args(typing.get_args(TRLTrainingFields.model_fields["loss_type"].annotation)[0]):
        assert f"'{loss}'" in fields["loss_type"].metadata["help"], loss


def test_absent_allowlisted_fields_are_not_passed(tmp_path):
    kwargs = grpo_config_kwargs(parse_run_config(BASE), output_dir=str(tmp_path), reward_weights=[1.0])
    assert {name for name in TRL_PASSTHROUGH if name in kwargs} == set(LAB_DEFAULTS) - {"gradient_checkpointing"}
    assert (kwargs["bf16"], kwargs["activation_checkpointing"]) == (False, False)
    assert "gradient_checkpointing" not in kwargs


@pytest.mark.parametrize("name", TRL_PASSTHROUGH)
def test_each_allowlisted_field_reaches_grpo_config(name, tmp_path, monkeypatch):
    # No GPU here: transformers refuses bf16 without one, so it is told there is one (the
    # translation is under test, not the hardware). The run is a CUDA run, as bf16 needs.
    monkeypatch.setattr("transformers.training_args.is_torch_bf16_gpu_available", lambda: True)
    value = TRL_VALUES[name]
    base = {**BASE, "device": "cuda"}
    baseline = GRPOConfig(**grpo_config_kwargs(parse_run_config(base), output_dir=str(tmp_path), reward_weights=[1.0]))
    config = parse_run_config({**base, "grpo": {name: value}})
    kwargs = grpo_config_kwargs(config, output_dir=str(tmp_path), reward_weights=[1.0])
    assert kwargs[TRL_NAMES.get(name, name)] == value
    args = GRPOConfig(**kwargs)
    assert getattr(baseline, name) != value
    assert getattr(args, name) == value
    if name == "gradient_checkpointing":
        assert args.activation_checkpointing is True


def test_scale_rewards_false_is_trl_none(tmp_path):
    config = parse_run_config({**BASE, "grpo": {"scale_rewards": False}})
    args = GRPOConfig(**grpo_config_kwargs(config, output_dir=str(tmp_path), reward_weights=[1.0]))
    assert args.scale_rewards == "none"


@pytest.mark.parametrize(
    ("grpo", "errors"),
    [
        ({"loss_type": "ppo"}, {"grpo.loss_type": [
            "Input should be 'grpo', 'dr_grpo', 'dapo', 'bnpo', 'cispo', 'sapo', 'luspo' or 'vespo'"]}),
        ({"top_p": 0}, {"grpo.top_p": ["Input should be greater than 0"]}),
        ({"lr_scheduler_type": "reduce_lr_on_plateau"}, {"grpo.lr_scheduler_type": [
            "Input should be 'linear', 'cosine', 'cosine_with_restarts', 'polynomial', 'constant', "
            "'constant_with_warmup' or 'inverse_sqrt'"]}),
        ({"warmup_steps": 2.5}, {"grpo.warmup_steps": [
            "warmup_steps is a whole number of steps, or a fraction of the run's steps below 1"]}),
        ({"warmup_ratio": 0.1}, {"grpo.warmup_ratio": ["Extra inputs are not permitted"]}),
        ({"fp16": True}, {"grpo.fp16": ["Extra inputs are not permitted"]}),
    ],
)
def test_allowlisted_fields_are_checked(grpo, errors):
    with pytest.raises(RunConfigError) as caught:
        parse_run_config({**BASE, "grpo": grpo})
    assert caught.value.errors == errors


def test_other_trackers_are_reported_to_by_trls_names_and_trackio_stays_local(tmp_path):
    config = parse_run_config({**BASE, "report_to": ["trackio", "tensorboard"]})
    kwargs = grpo_config_kwargs(config, output_dir=str(tmp_path), reward_weights=[1.0], run_name="run-7")
    assert {k: kwargs[k] for k in ("report_to", "run_name", "project", "trackio_space_id", "trackio_static_space_id")} == {
        "report_to": ["trackio", "tensorboard"], "run_name": "run-7", "project": "envlab",
        "trackio_space_id": None, "trackio_static_space_id": False,
    }
    args = GRPOConfig(**kwargs)
    assert (args.report_to, args.run_name, args.project, args.trackio_space_id) == (
        ["trackio", "tensorboard"], "run-7", "envlab", None
    )


def test_a_users_stored_wandb_key_reaches_only_their_run_and_never_past_the_operators(tmp_path, monkeypatch):
    """Issue 20 item 4: credentials from the worker's environment or the owner's stored secrets,
    never from the config; one run's key is gone before the next run in the same process."""
    from worker.training import trackers

    monkeypatch.setattr(trackers, "_OPERATOR", frozenset())
    for variable in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT"):
        monkeypatch.setenv(variable, "")  # recorded as it was, so that what the run sets goes at the end
        monkeypatch.delenv(variable)
    wandb = parse_run_config({**BASE, "report_to": ["wandb"]})
    monkeypatch.setitem(trackers.PACKAGES, "wandb", "json")  # a package that is there: W&B itself is not installed
    trackers.prepare_trackers(wandb, output_dir=tmp_path, trackio_dir=tmp_path, credentials={"WANDB_API_KEY": "k-alice"})
    assert os.environ["WANDB_API_KEY"] == "k-alice" and os.environ["WANDB_MODE"] == "offline"
    # The next run in this process has no key of its own (or reports to nothing): none is left.
    trackers.prepare_trackers(wandb, output_dir=tmp_path, trackio_dir=tmp_path, credentials={})
    assert "WANDB_API_KEY" not in os.environ
    trackers.prepare_trackers(wandb, output_dir=tmp_path, trackio_dir=tmp_path, credentials={"WANDB_API_KEY": "k"})
    trackers.prepare_trackers(parse_run_config(BASE), output_dir=tmp_path, trackio_dir=tmp_path)
    assert "WANDB_API_KEY" not in os.environ
    # A key only for a run that reports to W&B; the operator's own key wins and stays.
    assert "WANDB_API_KEY" not in trackers.tracker_environment(
        ["trackio"], output_dir=tmp_path, trackio_dir=tmp_path, credentials={"WANDB_API_KEY": "k"}
    )
    monkeypatch.setattr(trackers, "_OPERATOR", frozenset({"WANDB_API_KEY"}))
    monkeypatch.setenv("WANDB_API_KEY", "operator")
    trackers.prepare_trackers(wandb, output_dir=tmp_path, trackio_dir=tmp_path, credentials={"WANDB_API_KEY": "k"})
    assert os.environ["WANDB_API_KEY"] == "operator"


def test_a_trackers_files_go_where_the_operator_did_not_say_otherwise(tmp_path, monkeypatch):
    from worker.training import trackers

    monkeypatch.setattr(trackers, "_OPERATOR", frozenset({"MLFLOW_TRACKING_URI"}))
    env = trackers.tracker_environment(
        ["wandb", "mlflow", "tensorboard", "trackio"], output_dir=tmp_path, trackio_dir=tmp_path / "t"
    )
    assert env == {
        "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_PROJECT": "envlab",
        "TENSORBOARD_LOGGING_DIR": str(tmp_path / "tensorboard"), "TRACKIO_DIR": str(tmp_path / "t"),
    }
    assert trackers.missing_packages(["trackio"]) == []
    monkeypatch.setitem(trackers.PACKAGES, "wandb", "no_such_package_here")
    config = parse_run_config({**BASE, "report_to": ["wandb"]})
    with pytest.raises(RuntimeError, match="report_to names no_such_package_here, which this worker does not have"):
        trackers.prepare_trackers(config, output_dir=tmp_path, trackio_dir=tmp_path)
