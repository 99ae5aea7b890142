"""GRPOConfig's arguments from the one run config schema (webapp/runs/config.py): the schema's
own fields by name, plus the constants the lab sets. A pure function, so the translation is
tested field by field without a GPU (tests/worker/training/test_grpo_args.py)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from webapp.runs.config import VLLM_PASSTHROUGH, GRPOSettings, RunConfig
from webapp.runs.grpo_fields import TRL_PASSTHROUGH

# What the lab always sets, whatever the run asks for.
LAB_CONSTANTS: dict[str, Any] = {
    # The run page charts every step, and the run-health check reads every step's metrics.
    "logging_steps": 1,
    # The run-health check must see a NaN/inf loss; the default filter logs the average instead.
    "logging_nan_inf_filter": False,
    # Checkpoints every grpo.save_steps: the run's resume and model sources read them.
    "save_strategy": "steps",
    # The worker's log is the run's record, not a progress bar.
    "disable_tqdm": True,
    # Rows are built in the worker's memory, and TRL needs whole prompt groups in order.
    "dataloader_num_workers": 0,
}
# Settings the run may set (grpo.bf16, grpo.gradient_checkpointing; CPU runs may not turn them on)
# whose absence means off, as before they were settable, not TRL's default: GRPOConfig turns
# both on when unset, which a CPU run cannot use and which would change what an existing
# config trains.
LAB_DEFAULTS: dict[str, Any] = {"bf16": False, "gradient_checkpointing": False}


@functools.cache
def _checkpointing_name() -> str:
    """transformers 5 renamed gradient_checkpointing to activation_checkpointing (the old name a
    deprecated alias, ignored once the new one is set, as GRPOConfig's own default sets it):
    the name the installed version reads."""
    from trl import GRPOConfig

    names = {field.name for field in dataclasses.fields(GRPOConfig)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def trl_name(name: str) -> str:
    """The installed GRPOConfig's name for a run config's GRPO setting."""
    return _checkpointing_name() if name == "gradient_checkpointing" else name


def grpo_settings_kwargs(grpo: GRPOSettings) -> dict[str, Any]:
    """Every GRPOSettings field is a GRPOConfig field of the same name (tested); the allowlisted
    TRL fields only when set (absent: TRL's default), bf16 and gradient checkpointing off unless set."""
    kwargs = grpo.model_dump(exclude=set(TRL_PASSTHROUGH))
    for name in TRL_PASSTHROUGH:
        value = getattr(grpo, name)
        if value is None:
            value = LAB_DEFAULTS.get(name)
        if value is not None:
            kwargs[trl_name(name)] = value
    return kwargs


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


TRACKIO_PROJECT = "envlab"


def tracker_kwargs(config: RunConfig, *, run_name: str | None) -> dict[str, Any]:
    """report_to: "none" (envlab captures metrics itself, worker/training/telemetry.py) unless the
    run names trackers. Trackio stays on this machine: no Space, and no static copy pushed to the
    Hub at the end (its callback's default)."""
    if not config.report_to:
        return {"report_to": "none"}
    kwargs: dict[str, Any] = {"report_to": list(config.report_to)}
    if run_name:
        kwargs["run_name"] = run_name
    if "trackio" in config.report_to:
        kwargs.update(project=TRACKIO_PROJECT, trackio_space_id=None, trackio_static_space_id=False)
    return kwargs


def grpo_config_kwargs(
    config: RunConfig, *, output_dir: str, reward_weights: list[float], vllm_server_base_url: str | None = None,
    run_name: str | None = None,
) -> dict[str, Any]:
    """Everything GRPOConfig(...) gets for this run. `run_name`: how other trackers name it."""
    if config.grpo is None:
        raise ValueError("the run has no GRPO phase")
    return {
        "output_dir": output_dir,
        **grpo_settings_kwargs(config.grpo),
        "reward_weights": reward_weights,
        "use_cpu": config.device == "cpu",
        **generation_kwargs(config, vllm_server_base_url=vllm_server_base_url),
        **LAB_CONSTANTS,
        **tracker_kwargs(config, run_name=run_name),
    }
