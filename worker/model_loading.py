"""Loading a causal language model from what a run's `model` resolves to: a hub id, a folder of
full weights, or a LoRA checkpoint (a folder with `adapter_config.json` and the adapter alone,
written by a run with `peft`). An adapter is loaded on its base model and merged in, so every
caller (training, the warm-up, evaluations, the arena) gets a plain model whatever it started
from, and a new LoRA adapter goes on top of the merged weights."""

from __future__ import annotations

import json
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


def load_for_training(source: str, *, peft: Any, dtype: Any, token: str | None) -> tuple[Any, Any]:
    """The model a run trains and the `peft_config` to hand its trainer.

    A LoRA run (`peft` set) that starts from an adapter continues that adapter: the SFT
    warm-up's adapter in the GRPO phase, or another LoRA run's checkpoint (launch checks that
    `r` and `lora_alpha` match). Its checkpoints are then saved against the adapter's own base
    model, which is what it was trained on. Anything else is loaded plainly (an adapter merged
    in) and a LoRA run puts a new adapter on it."""
    if peft is not None and is_adapter(source):
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(source, dtype=dtype, token=token, is_trainable=True)
        return model, None
    model = load_causal_lm(source, dtype=dtype, token=token)
    return model, (lora_config(peft) if peft is not None else None)


def adapter_base(source: str) -> str:
    """The base model an adapter folder was trained on (peft's `base_model_name_or_path`);
    `source` itself when it is not an adapter. A vLLM server starts from this: it serves full
    weights, and TRL sends it the merged adapter's weights as training goes."""
    if not is_adapter(source):
        return source
    recorded = json.loads((Path(source) / ADAPTER_CONFIG).read_text())
    base = recorded.get("base_model_name_or_path") if isinstance(recorded, dict) else None
    if not isinstance(base, str) or not base:
        raise ValueError(f"the adapter at {source} does not name its base model")
    return base


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
