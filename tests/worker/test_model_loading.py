"""LoRA settings (webapp/runs/config.py PeftSettings) and the loader every worker path shares
(worker/model_loading.py): a LoRA checkpoint loads as its base model with the adapter merged in."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from webapp.runs.config import RunConfigError, parse_run_config
from worker.model_loading import (
    adapter_base,
    is_adapter,
    load_causal_lm,
    load_for_training,
    lora_config,
)

BASE = {"name": "r", "model": "demo:echo", "environments": [{"environment": 1, "prompt": "Echo 'x'."}]}


def _errors(**extra) -> dict[str, list[str]]:
    with pytest.raises(RunConfigError) as caught:
        parse_run_config({**BASE, **extra})
    return caught.value.errors


def test_lora_settings_parse_with_defaults_and_reach_peft_as_given():
    config = parse_run_config({**BASE, "peft": {"r": 8, "target_modules": ["q_proj", "v_proj"]}})
    assert config.peft is not None and config.peft.label() == "LoRA r=8"
    made = lora_config(config.peft)
    assert (made.r, made.lora_alpha, made.lora_dropout, set(made.target_modules)) == (8, 32, 0.05, {"q_proj", "v_proj"})
    assert str(made.task_type) in ("CAUSAL_LM", "TaskType.CAUSAL_LM")
    assert parse_run_config(BASE).peft is None  # full training unless asked


def test_lora_settings_that_cannot_run_are_refused_with_the_field():
    assert list(_errors(peft={"r": 0})) == ["peft.r"]
    assert list(_errors(peft={"target_modules": ["q_proj;rm"]})) == ["peft.target_modules"]
    assert list(_errors(peft={"target_modules": []})) == ["peft.target_modules"]
    assert list(_errors(peft={"rank": 4})) == ["peft.rank"]


def test_lora_with_a_warm_up_is_one_adapter_for_both_phases():
    warm = parse_run_config({**BASE, "peft": {"r": 4}, "sft_warmup": {"source": "solver", "episodes": 4}})
    assert warm.peft is not None and warm.sft_warmup is not None and warm.grpo is not None
    alone = parse_run_config({**BASE, "peft": {"r": 4}, "sft_warmup": {"source": "solver", "episodes": 4},
                              "grpo": None})
    assert alone.peft is not None and alone.grpo is None  # the warm-up alone trains an adapter


def _tiny(path: Path) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=8, max_position_embeddings=32,
    ))
    model.save_pretrained(path)
    return model


def test_a_lora_checkpoint_loads_as_its_base_with_the_adapter_merged(tmp_path):
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from webapp.runs.config import PeftSettings

    _tiny(tmp_path / "base")
    base = AutoModelForCausalLM.from_pretrained(str(tmp_path / "base"), dtype=torch.float32)
    with_adapter = get_peft_model(base, lora_config(PeftSettings(r=4, lora_alpha=8)))
    with torch.no_grad():  # a trained adapter: lora_B starts at zero, which would change nothing
        for name, parameter in with_adapter.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5)
    with_adapter.eval()  # no dropout in the reference outputs
    with_adapter.save_pretrained(tmp_path / "checkpoint-2")
    tokens = torch.tensor([[1, 5, 9, 12]])
    with torch.no_grad():
        expected = with_adapter(tokens).logits

    assert is_adapter(str(tmp_path / "checkpoint-2")) and not is_adapter(str(tmp_path / "base"))
    assert not (tmp_path / "checkpoint-2" / "model.safetensors").exists()  # the adapter alone
    loaded = load_causal_lm(str(tmp_path / "checkpoint-2"), dtype=torch.float32, token=None)
    assert type(loaded).__name__ == "Qwen3ForCausalLM"  # merged: a plain model for every caller
    with torch.no_grad():
        got = loaded(tokens).logits
        plain = AutoModelForCausalLM.from_pretrained(str(tmp_path / "base"), dtype=torch.float32)(tokens).logits
    assert torch.allclose(got, expected, atol=1e-5)
    assert not torch.allclose(got, plain, atol=1e-3)  # the adapter is in it


def test_a_lora_run_from_an_adapter_continues_it_and_a_full_run_merges_it(tmp_path):
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from webapp.runs.config import PeftSettings

    _tiny(tmp_path / "base")
    base = AutoModelForCausalLM.from_pretrained(str(tmp_path / "base"), dtype=torch.float32)
    with_adapter = get_peft_model(base, lora_config(PeftSettings(r=4, lora_alpha=8)))
    with torch.no_grad():
        for name, parameter in with_adapter.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5)
    with_adapter.save_pretrained(tmp_path / "warmup")
    trained = {n: p.detach().clone() for n, p in with_adapter.named_parameters() if "lora_" in n}
    source = str(tmp_path / "warmup")
    assert adapter_base(source) == str(tmp_path / "base") and adapter_base(str(tmp_path / "base")) == str(
        tmp_path / "base")

    # LoRA from an adapter: the same adapter, trainable, and no new one for the trainer to add.
    continued, peft_config = load_for_training(source, peft=PeftSettings(r=4, lora_alpha=8), dtype=torch.float32,
                                               token=None)
    assert peft_config is None and type(continued).__name__.startswith("Peft")
    got = {n: p for n, p in continued.named_parameters() if "lora_" in n}
    assert got.keys() == trained.keys()
    assert all(p.requires_grad and torch.equal(p.detach(), trained[n]) for n, p in got.items())
    assert not any(p.requires_grad for n, p in continued.named_parameters() if "lora_" not in n)  # base frozen

    # Every weight trained: the adapter merged into a plain model; a new LoRA goes on plain weights.
    merged, none = load_for_training(source, peft=None, dtype=torch.float32, token=None)
    assert none is None and type(merged).__name__ == "Qwen3ForCausalLM"
    fresh, config = load_for_training(str(tmp_path / "base"), peft=PeftSettings(r=2), dtype=torch.float32,
                                      token=None)
    assert type(fresh).__name__ == "Qwen3ForCausalLM" and config.r == 2
