"""The run config becomes GRPOConfig field by field (no GPU needed: GRPOConfig only records
the vLLM settings; the trainer is what would load vLLM)."""

from __future__ import annotations

import dataclasses

import pytest
from trl import GRPOConfig

from webapp.runs.config import VLLM_PASSTHROUGH, GRPOSettings, RunConfigError, parse_run_config
from worker.training.grpo_args import LAB_CONSTANTS, grpo_config_kwargs

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
    assert kwargs == {
        "output_dir": str(tmp_path), **GRPO, "reward_weights": [1.0, 0.1], "use_cpu": True, "use_vllm": False,
        **LAB_CONSTANTS,
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
