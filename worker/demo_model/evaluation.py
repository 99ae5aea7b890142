"""Measure how often the model calls the echo tool, parsed the way TRL parses it in GRPO."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch
from transformers import GenerationMixin, PreTrainedTokenizerBase

from .conversations import TRAINING_WORDINGS, echo, random_phrase, user_prompt
from .rendering import chat_encoding


@dataclass(frozen=True)
class ToolCallRate:
    samples: int
    tool_calls: int  # parsed into a call of `echo` with a string `message`
    correct: int  # ... whose message is exactly the requested phrase

    @property
    def tool_call_rate(self) -> float:
        return self.tool_calls / self.samples if self.samples else 0.0

    @property
    def correct_rate(self) -> float:
        return self.correct / self.samples if self.samples else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "samples": self.samples,
            "tool_call_rate": round(self.tool_call_rate, 4),
            "correct_phrase_rate": round(self.correct_rate, 4),
        }


def echo_call_message(parsed: dict[str, Any]) -> str | None:
    """The `message` of the first tool call if it is a well-formed call of `echo`."""
    calls = parsed.get("tool_calls") or []
    if not calls:
        return None
    function = calls[0].get("function", {})
    arguments = function.get("arguments")
    if function.get("name") != "echo" or not isinstance(arguments, dict):
        return None
    message = arguments.get("message")
    return message if isinstance(message, str) else None


@torch.no_grad()
def generate_prompt_completions(
    model: GenerationMixin,
    tokenizer: PreTrainedTokenizerBase,
    conversations: list[list[dict[str, Any]]],
    *,
    tools: list[Any],
    temperature: float | None,
    seed: int,
    max_new_tokens: int = 48,
) -> tuple[list[list[int]], list[list[int]]]:
    """(prompt ids, completion ids) per conversation, rendered with `tools` and the
    generation prompt; `temperature=None` means greedy."""
    prompt_ids = [
        list(chat_encoding(tokenizer, messages, tools=tools, add_generation_prompt=True)["input_ids"])
        for messages in conversations
    ]
    return prompt_ids, _generate(
        model, tokenizer, prompt_ids, temperature=temperature, seed=seed, max_new_tokens=max_new_tokens
    )


def _generate(
    model: GenerationMixin,
    tokenizer: PreTrainedTokenizerBase,
    prompt_ids: list[list[int]],
    *,
    temperature: float | None,
    seed: int,
    max_new_tokens: int,
) -> list[list[int]]:
    width = max(len(ids) for ids in prompt_ids)
    pad = tokenizer.pad_token_id
    # Left padding, so every prompt ends where generation starts.
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in prompt_ids])
    attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompt_ids])
    torch.manual_seed(seed)
    sampling: dict[str, Any] = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature is not None
        else {"do_sample": False}
    )
    output = model.generate(
        input_ids=input_ids,
        attention_mask=attention,
        max_new_tokens=max_new_tokens,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=pad,
        **sampling,
    )
    completions = []
    for row in output[:, width:].tolist():
        # Keep the stop token, as TRL's completion ids do, and drop the padding after it.
        if tokenizer.eos_token_id in row:
            row = row[: row.index(tokenizer.eos_token_id) + 1]
        completions.append(row)
    return completions


@torch.no_grad()
def generate_completions(
    model: GenerationMixin,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    *,
    temperature: float | None,
    seed: int,
    max_new_tokens: int = 48,
) -> tuple[list[list[int]], list[list[int]]]:
    """(prompt ids, completion ids) per prompt; `temperature=None` means greedy."""
    prompt_ids = [
        list(
            chat_encoding(
                tokenizer, [{"role": "user", "content": p}], tools=[echo], add_generation_prompt=True
            )["input_ids"]
        )
        for p in prompts
    ]
    completions = _generate(
        model, tokenizer, prompt_ids, temperature=temperature, seed=seed, max_new_tokens=max_new_tokens
    )
    return prompt_ids, completions


def measure_tool_calls(
    model: GenerationMixin,
    tokenizer: PreTrainedTokenizerBase,
    *,
    samples: int,
    temperature: float | None,
    seed: int,
    wordings: tuple[str, ...] = TRAINING_WORDINGS[:1],
    max_words: int = 3,
) -> ToolCallRate:
    """Sample completions for fresh echo requests (each a random phrase of 1 to `max_words`
    words in one of `wordings`, in turn) and parse them with TRL's
    `parse_response` (the response template `add_response_schema` picks for the chat
    template, the prompt as prefix, the tools as schema), as GRPOTrainer does."""
    from trl.chat_template_utils import add_response_schema, parse_response

    if getattr(tokenizer, "response_template", None) is None:
        add_response_schema(tokenizer)
    rng = random.Random(seed)
    phrases = [random_phrase(rng, max_words=max_words) for _ in range(samples)]
    prompt_ids, completions = generate_completions(
        model,
        tokenizer,
        [user_prompt(p, wordings[i % len(wordings)]) for i, p in enumerate(phrases)],
        temperature=temperature,
        seed=seed,
    )
    calls = correct = 0
    for phrase, prefix, ids in zip(phrases, prompt_ids, completions, strict=True):
        message = echo_call_message(parse_response(tokenizer, ids, prefix=prefix, tools=[echo]))
        calls += message is not None
        correct += message == phrase
    return ToolCallRate(samples=samples, tool_calls=calls, correct=correct)
