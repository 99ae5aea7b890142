"""GPU memory of one training step with and without bf16 + LoRA + gradient checkpointing (issue 20's device
check), on the shape of Qwen3-0.6B (random weights: the hub cannot be reached from the device) with a
GRPO-sized batch (8 completions x 1024 tokens). Not a run through the lab: TRL and the lab's stack are not
installed on the device machine; the same knobs the run config passes (worker/model_loading.py lora_config's
settings, bf16, gradient checkpointing) on the same model class, measured as the lab's perf/gpu_memory_gib
is (torch.cuda.max_memory_allocated over the steps).

    python3 bench/gpu/lora_memory.py   # prints one JSON line per variant
"""

from __future__ import annotations

import json
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen3Config, Qwen3ForCausalLM

SHAPE = dict(  # Qwen3-0.6B's published config
    vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
    num_key_value_heads=8, head_dim=128, max_position_embeddings=4096, tie_word_embeddings=True,
)
BATCH, TOKENS, STEPS = 8, 1024, 3


def measure(*, bf16: bool, lora: bool, checkpointing: bool) -> dict:
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**SHAPE)).to("cuda", dtype=torch.bfloat16 if bf16 else torch.float32)
    if checkpointing:
        model.config.use_cache = False
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    if lora:
        model = get_peft_model(model, LoraConfig(
            r=16, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear", task_type="CAUSAL_LM"))
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-5)
    batch = torch.randint(0, SHAPE["vocab_size"], (BATCH, TOKENS), device="cuda")
    seconds = []
    for _ in range(STEPS):
        torch.cuda.synchronize()
        started = time.perf_counter()
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
    out = {
        "bf16": bf16, "lora": lora, "gradient_checkpointing": checkpointing,
        "gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "trainable_params": sum(p.numel() for p in trainable),
        "step_s_median": round(sorted(seconds)[len(seconds) // 2], 3), "loss": round(float(loss), 4),
    }
    del model, optimizer, batch, loss
    return out


if __name__ == "__main__":
    print(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}), flush=True)
    for variant in (dict(bf16=False, lora=False, checkpointing=False), dict(bf16=True, lora=True, checkpointing=True),
                    dict(bf16=True, lora=False, checkpointing=False), dict(bf16=False, lora=True, checkpointing=False)):
        print(json.dumps(measure(**variant)), flush=True)
