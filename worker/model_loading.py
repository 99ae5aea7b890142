"""Loading a causal language model from what a run's `model` resolves to: a hub id, a folder of
full weights, or a LoRA checkpoint (a folder with `adapter_config.json` and the adapter alone,
written by a run with `peft`). An adapter is loaded on its base model and merged in, so every
caller (training, the warm-up, evaluations, the arena) gets a plain model whatever it started
from, and a new LoRA adapter goes on top of the merged weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"


def is_adapter(source: str) -> bool:
    return source.startswith("/") and (Path(source) / ADAPTER_CONFIG).is_file()


def load_causal_lm(source: str, *, dtype: Any, token: str | None) -> Any:
    from transformers import AutoModelForCausalLM

    if is_adapter(source):
        from peft import AutoPeftModelForCausalLM

        # The base named in the adapter's config: the model the LoRA run itself started from
        # (checked when that run was launched), read with the same owner's token.
        with_adapter = AutoPeftModelForCausalLM.from_pretrained(source, dtype=dtype, token=token)
        return with_adapter.merge_and_unload()
    return AutoModelForCausalLM.from_pretrained(source, dtype=dtype, token=token)


def lora_config(settings: Any) -> Any:
    """peft's LoraConfig for a run's `peft` settings (webapp/runs/config.py PeftSettings)."""
    from peft import LoraConfig

    return LoraConfig(
        r=settings.r,
        lora_alpha=settings.lora_alpha,
        lora_dropout=settings.lora_dropout,
        target_modules=settings.target_modules,
        task_type="CAUSAL_LM",
    )
