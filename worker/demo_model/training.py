"""The tiny Qwen3 model and its supervised warm-up on echo-tool conversations."""

from __future__ import annotations

import inspect
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from transformers import (
    DynamicCache,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3Model,
)

from .conversations import echo, training_conversation
from .rendering import chat_encoding

IGNORE_INDEX = -100


@dataclass(frozen=True)
class Recipe:
    """Everything that differs between the `test` and `demo` variants."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    head_dim: int
    init_std: float
    train_examples: int
    max_steps: int
    cooldown_steps: int
    converged_loss: float
    batch_size: int
    learning_rate: float
    warmup_steps: int
    eval_samples: int
    # Second phase: after learning to copy, a short run on copies that are exact only this
    # often (the rest have one slip), so the model starts GRPO knowing the tool call but
    # copying unreliably. 1.0 / 0 steps: no second phase.
    exact_fraction: float = 1.0
    loosen_steps: int = 0
    loosen_learning_rate: float = 0.0


# Measured on 2 CPU cores (see the manifest's `sft` block for a given build). Copying the
# phrase is learned in a sudden drop after a plateau; what shortened the plateau most:
# head_dim 32 rather than hidden/heads = 16 (Qwen3 RMS-normalises q and k, capping
# attention logits near sqrt(head_dim)), initialising weights at std 0.08 instead of
# Qwen's 0.02 (tuned for a hidden size of thousands), and batches of 32 rather than 16.
# With those, seeds 0-5 all converged within 300-430 steps; with the defaults some seeds
# had not in 2,500.
#
# The demo variant then unlearns some of it on purpose ("loosening": 150 steps on copies
# exact 10% of the time), so the one-click demo has something to learn: it keeps the
# tool-call format (100% of calls well formed on its own wording, 95% on wordings it never
# saw) but copies the phrase exactly in about 19% of samples at temperature 1, 44% greedy.
# With demo_config (webapp/runs/demo.py: temperature 0.7, lr 4e-4, 8 x 8 rollouts) the
# reward of steps 1-3 / 28-30 measured 0.567 / 0.928, 0.535 / 0.949 and 0.484 / 0.923 for
# seeds 0, 1 and 2 (build 121 s, training 74-80 s on 2 shared cores). A build is
# deterministic: the same seed gives the same weights with 1 or 2 threads.
_DEMO = Recipe(
    vocab_size=1024,
    hidden_size=64,
    intermediate_size=256,
    num_layers=2,
    num_heads=4,
    head_dim=32,
    init_std=0.08,
    train_examples=3000,
    max_steps=1400,
    cooldown_steps=150,
    converged_loss=0.03,
    batch_size=32,
    learning_rate=3e-3,
    warmup_steps=50,
    eval_samples=64,
    exact_fraction=0.1,
    loosen_steps=150,
    loosen_learning_rate=2e-3,
)

RECIPES: dict[str, Recipe] = {
    "demo": _DEMO,
    # The demo architecture, trained less: it only needs to call the tool in a well-formed
    # way, which comes long before copying (and it is not loosened).
    "test": replace(
        _DEMO,
        train_examples=800,
        max_steps=200,
        cooldown_steps=80,
        warmup_steps=20,
        eval_samples=16,
        exact_fraction=1.0,
        loosen_steps=0,
        loosen_learning_rate=0.0,
    ),
}


@dataclass(frozen=True)
class CatchRecipe(Recipe):
    """A model for Catch (worker/demo_model/catch.py): warmed up on random-policy episodes
    on a `rows` x `columns` grid, so it knows the tool calls and not the game."""

    rows: int = 4
    columns: int = 3


# See worker/demo_model/catch.py. converged_loss 0: the loss of random moves has a floor,
# so the rate stays constant until the last `cooldown_steps`. Measured on 2 shared cores:
# build 167 s; greedy it always stays (13/30 catches on eval seeds 1000-1029 of a 4x3
# grid, the balls that fall in the middle column), 100% well-formed calls. A build for one
# grid does not transfer: the 5-row build made no call on 4 rows.
CATCH_BASE = RECIPES["catch-base"] = CatchRecipe(
    vocab_size=1024,
    hidden_size=128,
    intermediate_size=512,
    num_layers=2,
    num_heads=4,
    head_dim=32,
    init_std=0.08,
    train_examples=600,
    max_steps=150,
    cooldown_steps=50,
    converged_loss=0.0,
    batch_size=16,
    learning_rate=3e-3,
    warmup_steps=20,
    eval_samples=32,
    rows=4,
    columns=3,
)


def save_and_reload(model: Any, tokenizer: Any, folder: Path) -> tuple[Any, Any]:
    """Save the model and tokenizer to `folder` and load them back, as a trainer will: what is
    measured after a build is what was saved."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    saved_tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    saved_model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    saved_model.eval()
    return saved_model, saved_tokenizer


def new_model(recipe: Recipe, tokenizer: PreTrainedTokenizerFast) -> Qwen3ForCausalLM:
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.num_layers,
        num_attention_heads=recipe.num_heads,
        num_key_value_heads=recipe.num_heads,
        # Qwen3Config defaults head_dim to 128 whatever the hidden size.
        head_dim=recipe.head_dim,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        initializer_range=recipe.init_std,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    return model


@dataclass(frozen=True)
class Example:
    input_ids: list[int]
    labels: list[int]


def encode_conversations(
    tokenizer: Any, conversations: list[list[dict[str, Any]]], *, tools: list[Any]
) -> list[Example]:
    """Conversations as training examples, rendered exactly as TRL renders prompts (same
    template, same tool schemas); labels keep the assistant turns only.

    The mask comes from TRL's training twin of the chat template, which differs from the
    original only by `{% generation %}` markers, so the token ids are the same (checked on
    the first conversation)."""
    from trl.chat_template_utils import get_training_chat_template

    training_template = get_training_chat_template(tokenizer)
    if training_template is None:
        raise RuntimeError("TRL has no training template for the demo chat template")
    examples: list[Example] = []
    for conversation in conversations:
        rendered = chat_encoding(
            tokenizer,
            conversation,
            tools=tools,
            chat_template=training_template,
            return_assistant_tokens_mask=True,
        )
        ids: list[int] = list(rendered["input_ids"])
        mask: list[int] = list(rendered["assistant_masks"])
        if not examples and ids != list(chat_encoding(tokenizer, conversation, tools=tools)["input_ids"]):
            raise RuntimeError("TRL's training template no longer renders like the chat template")
        labels = [t if m else IGNORE_INDEX for t, m in zip(ids, mask, strict=True)]
        examples.append(Example(input_ids=ids, labels=labels))
    return examples


def encode_examples(
    tokenizer: PreTrainedTokenizerFast,
    *,
    count: int,
    rng: random.Random,
    exact_fraction: float = 1.0,
) -> list[Example]:
    """`count` echo conversations (tool schema from `tools=[echo]`) as training examples."""
    conversations = [training_conversation(rng, exact_fraction=exact_fraction) for _ in range(count)]
    return encode_conversations(tokenizer, conversations, tools=[echo])


def _collate(batch: list[Example], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(e.input_ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, example in enumerate(batch):
        n = len(example.input_ids)
        ids[row, :n] = torch.tensor(example.input_ids)
        labels[row, :n] = torch.tensor(example.labels)
        attention[row, :n] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": attention}


def shared_prefix(examples: list[Example]) -> list[int]:
    """The leading tokens every example has in common (the tool prompt), unlabelled."""
    first = examples[0].input_ids
    length = 0
    while length < len(first) - 1 and all(
        len(e.input_ids) > length + 1 and e.input_ids[length] == first[length] for e in examples
    ):
        length += 1
    # The last prefix position predicts the first suffix token: keep it out of the loss.
    if any(label != IGNORE_INDEX for e in examples for label in e.labels[: length + 1]):
        raise RuntimeError("the shared prompt prefix overlaps the assistant turns")
    return first[:length]


# transformers 5.24 renamed `past_key_values` to `cache` (the old name warns until 5.40).
_CACHE_KWARG = (
    "cache" if "cache" in inspect.signature(Qwen3Model.forward).parameters else "past_key_values"
)


def _assistant_loss(
    model: Qwen3ForCausalLM, prefix: torch.Tensor, batch: dict[str, torch.Tensor]
) -> torch.Tensor:
    """Next-token loss on labelled positions only.

    The tool prompt is the same for every example, so it runs once per step and its keys
    and values are repeated across the batch (gradients flow through them); the LM head
    runs only on labelled positions. Same loss and gradients as a full forward, at about
    half the cost."""
    rows, width = batch["input_ids"].shape
    cache = DynamicCache(config=model.config)
    model.model(input_ids=prefix[None], use_cache=True, **{_CACHE_KWARG: cache})
    cache.batch_repeat_interleave(rows)
    hidden = model.model(
        input_ids=batch["input_ids"],
        attention_mask=torch.cat(
            [torch.ones(rows, len(prefix), dtype=torch.long), batch["attention_mask"]], dim=1
        ),
        position_ids=torch.arange(len(prefix), len(prefix) + width).expand(rows, width),
        use_cache=True,
        **{_CACHE_KWARG: cache},
    ).last_hidden_state
    targets = batch["labels"][:, 1:]
    keep = targets != IGNORE_INDEX
    logits = model.lm_head(hidden[:, :-1][keep])
    return torch.nn.functional.cross_entropy(logits, targets[keep])


def _split_prefix(examples: list[Example]) -> tuple[torch.Tensor, list[Example]]:
    """The shared prompt prefix (`_assistant_loss` runs it once per step) and the examples
    without it."""
    prefix_ids = shared_prefix(examples)
    return torch.tensor(prefix_ids), [
        Example(e.input_ids[len(prefix_ids) :], e.labels[len(prefix_ids) :]) for e in examples
    ]


def _train_step(
    model: Qwen3ForCausalLM,
    optimizer: torch.optim.Optimizer,
    prefix: torch.Tensor,
    batch: dict[str, torch.Tensor],
) -> float:
    """One AdamW step on the assistant tokens of `batch` (gradients clipped to norm 1);
    returns its loss."""
    loss = _assistant_loss(model, prefix, batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


class _Schedule:
    """Linear warm-up, then a constant rate until the running loss shows the model copies
    phrases (`converged_loss`), then a linear cool-down over `cooldown_steps`.

    Copying is learned in a sudden drop after a plateau whose length varies with the seed
    (an induction-head phase change); a fixed decay would often cool down before it."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.end = recipe.max_steps
        self.cooldown_from = recipe.max_steps - recipe.cooldown_steps
        self.converged_at: int | None = None

    def observe(self, step: int, running_loss: float) -> None:
        if self.converged_at is None and running_loss < self.recipe.converged_loss:
            self.converged_at = step
            if step < self.cooldown_from:
                self.cooldown_from = step
                self.end = step + self.recipe.cooldown_steps

    def rate(self, step: int) -> float:
        r = self.recipe
        if step < r.warmup_steps:
            return r.learning_rate * (step + 1) / r.warmup_steps
        if step < self.cooldown_from:
            return r.learning_rate
        left = (self.end - step) / max(1, self.end - self.cooldown_from)
        return r.learning_rate * (0.05 + 0.95 * left)


def supervised_warmup(
    model: Qwen3ForCausalLM,
    examples: list[Example],
    recipe: Recipe,
    *,
    pad_id: int,
    seed: int,
    progress: Callable[[str], None],
) -> dict[str, float | int | None]:
    """Plain AdamW on the assistant tokens. Returns the steps run, the step at which the
    loss showed copying (None if never) and the mean loss of the last 20 steps."""
    rng = random.Random(seed)
    prefix, examples = _split_prefix(examples)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, weight_decay=0.0)
    schedule = _Schedule(recipe)
    model.train()
    order: list[int] = []
    recent: list[float] = []
    report_every = max(1, recipe.max_steps // 25)
    started = time.monotonic()
    step = 0
    while step < schedule.end:
        if len(order) < recipe.batch_size:
            order = list(range(len(examples)))
            rng.shuffle(order)
        batch = [examples[order.pop()] for _ in range(recipe.batch_size)]
        for group in optimizer.param_groups:
            group["lr"] = schedule.rate(step)
        recent = [*recent, _train_step(model, optimizer, prefix, _collate(batch, pad_id))][-20:]
        step += 1
        if len(recent) == 20:
            schedule.observe(step, sum(recent) / 20)
        if step % report_every == 0 or step == schedule.end:
            progress(
                f"step {step}/{schedule.end} loss {sum(recent) / len(recent):.4f} "
                f"({time.monotonic() - started:.0f}s)"
            )
    model.eval()
    return {
        "steps": step,
        "converged_at_step": schedule.converged_at,
        "final_loss": round(sum(recent) / len(recent), 4),
    }


def loosen_copying(
    model: Qwen3ForCausalLM,
    examples: list[Example],
    recipe: Recipe,
    *,
    pad_id: int,
    seed: int,
    progress: Callable[[str], None],
) -> dict[str, float | int]:
    """`recipe.loosen_steps` of AdamW at a constant rate on imperfect copies: the copying
    learned first gets unreliable while the tool-call format stays. Returns the steps run
    and the mean loss of the last 20."""
    rng = random.Random(seed + 7)
    prefix, examples = _split_prefix(examples)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=recipe.loosen_learning_rate, weight_decay=0.0
    )
    model.train()
    recent: list[float] = []
    started = time.monotonic()
    report_every = max(1, recipe.loosen_steps // 5)
    for step in range(1, recipe.loosen_steps + 1):
        batch = [rng.choice(examples) for _ in range(recipe.batch_size)]
        recent = [*recent, _train_step(model, optimizer, prefix, _collate(batch, pad_id))][-20:]
        if step % report_every == 0 or step == recipe.loosen_steps:
            progress(
                f"loosen step {step}/{recipe.loosen_steps} loss {sum(recent) / len(recent):.4f} "
                f"({time.monotonic() - started:.0f}s)"
            )
    model.eval()
    return {
        "steps": recipe.loosen_steps,
        "final_loss": round(sum(recent) / len(recent), 4) if recent else 0.0,
    }
