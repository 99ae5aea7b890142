"""GRPOConfig's arguments from the one run config schema (webapp/runs/config.py): the schema's
own fields by name, plus the constants the lab sets. A pure function, so the translation is
tested field by field without a GPU (tests/worker/training/test_grpo_args.py)."""

from __future__ import annotations

from typing import Any

from webapp.runs.config import VLLM_PASSTHROUGH, GRPOSettings, RunConfig

# What the lab always sets, whatever the run asks for.
LAB_CONSTANTS: dict[str, Any] = {
    "logging_steps": 1,
    # The run-health check must see a NaN/inf loss; the default filter logs the average instead.
    "logging_nan_inf_filter": False,
    "save_strategy": "steps",
    "report_to": "none",
    "disable_tqdm": True,
    "bf16": False,
    "activation_checkpointing": False,  # transformers 5 name of gradient_checkpointing
    "dataloader_num_workers": 0,
}


def grpo_settings_kwargs(grpo: GRPOSettings) -> dict[str, Any]:
    """Every GRPOSettings field is a GRPOConfig field of the same name (tested)."""
    return grpo.model_dump()


def generation_kwargs(config: RunConfig, *, vllm_server_base_url: str | None = None) -> dict[str, Any]:
    """use_vllm and the vLLM fields the run set. `vllm_server_base_url`: the managed server's
    address, where the worker started one (worker/training/vllm_server.py)."""
    generation = config.generation
    if generation.backend != "vllm":
        return {"use_vllm": False}
    kwargs: dict[str, Any] = {"use_vllm": True, "vllm_mode": generation.vllm_mode}
    url = generation.vllm_server_base_url or vllm_server_base_url
    if generation.vllm_mode == "server" and url:
        kwargs["vllm_server_base_url"] = url
    for name in VLLM_PASSTHROUGH:
        value = getattr(generation, name)
        if value is not None:
            kwargs[name] = value
    return kwargs


def grpo_config_kwargs(
    config: RunConfig, *, output_dir: str, reward_weights: list[float], vllm_server_base_url: str | None = None
) -> dict[str, Any]:
    """Everything GRPOConfig(...) gets for this run."""
    if config.grpo is None:
        raise ValueError("the run has no GRPO phase")
    return {
        "output_dir": output_dir,
        **grpo_settings_kwargs(config.grpo),
        "reward_weights": reward_weights,
        "use_cpu": config.device == "cpu",
        **generation_kwargs(config, vllm_server_base_url=vllm_server_base_url),
        **LAB_CONSTANTS,
    }
