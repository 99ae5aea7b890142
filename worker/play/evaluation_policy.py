"""A model as a Policy (envs/solvers.py): greedy decoding through the chat template and the
tools, tool calls parsed and continued exactly as TRL 1.16's GRPOTrainer does in
`_generate` and `_tool_call_loop`:

- the prompt rendered with `apply_chat_template(prompt, tools=..., add_generation_prompt=True,
  **chat_template_kwargs)` (the training-safe template when the tokenizer's own is not
  prefix-preserving, as TRL picks it);
- each completion parsed by `trl.chat_template_utils.parse_response(tokenizer, ids,
  prefix=<the ids before it>, tools=...)`; every call of a turn executed, then the tool
  results' suffix ids (TRL's `_get_tool_suffix_ids`) appended to the ids and the next turn
  generated from prompt + completion + suffix, without re-tokenising;
- at most `max_tool_calling_iterations` rounds of tool execution; a round whose suffix would
  push the completion past `max_completion_length` (or the model's context) is not run, and
  post-tool generation is cut to the remaining budget.

Imported only in the worker (torch, transformers, trl).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import torch

from envs.solvers import ToolCall


def prepare_tokenizer(tokenizer: Any) -> Any:
    """What GRPOTrainer's constructor does to a tokenizer when tools are given: add the
    response schema (so tool calls can be parsed) unless one is set. The tokenizer is left
    without one when TRL does not know its template: completions then parse as plain text,
    with no tool call, as in training."""
    from trl.chat_template_utils import add_response_schema

    if (
        getattr(tokenizer, "response_template", None) is None
        and getattr(tokenizer, "response_schema", None) is None
    ):
        try:
            tokenizer = add_response_schema(tokenizer)
        except ValueError:
            pass
    return tokenizer


def training_chat_template(tokenizer: Any) -> str | None:
    from trl.chat_template_utils import (
        get_training_chat_template,
        is_chat_template_prefix_preserving,
    )

    if is_chat_template_prefix_preserving(tokenizer):
        return None
    return get_training_chat_template(tokenizer)


class ModelPolicy:
    """One episode's policy for a loaded model (make one per episode; the model is shared)."""

    def __init__(
        self,
        *,
        model: Any,
        tokenizer: Any,
        tools: list[Callable[..., Any]],
        max_completion_length: int,
        max_tool_calling_iterations: int,
        chat_template_kwargs: Mapping[str, Any],
        chat_template: str | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> None:
        """`temperature`: sample at it, as GRPO does (a dry run's groups need their spread);
        None decodes greedily (evaluations). `seed` makes the sampling repeatable."""
        self.model = model
        self.temperature = temperature
        self.generator = torch.Generator().manual_seed(seed) if seed is not None else None
        self.tokenizer = tokenizer
        # Typed as TRL takes them (functions or JSON schemas): a list is invariant in its items.
        self.tools: list[dict[Any, Any] | Callable[..., Any]] = list(tools)
        self.max_completion_length = max_completion_length
        self.max_iterations = max_tool_calling_iterations
        self.kwargs = dict(chat_template_kwargs)
        self.chat_template = chat_template
        self.final_text = ""
        self._prompt_ids: list[int] = []
        self._completion_ids: list[int] = []
        self._pending: deque[ToolCall] = deque()
        self._turn_results: list[dict[str, Any]] = []
        self._asked: ToolCall | None = None
        self._iterations = 0
        self._generated = False

    def start(self, prompt: str, row: Mapping[str, Any]) -> None:
        messages = _row_messages(row, prompt)
        rendered = self.tokenizer.apply_chat_template(
            messages,
            tools=self.tools or None,
            chat_template=self.chat_template,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            **self.kwargs,
        )
        ids = rendered["input_ids"]
        self._prompt_ids = list(ids[0] if ids and isinstance(ids[0], list) else ids)

    def next_call(self, last_result: str | None) -> ToolCall | None:
        if not self._generated:
            self._generated = True
            parsed = self._generate(self._prompt_ids, self.max_completion_length)
            return self._take_turn(parsed)
        if self._asked is not None:
            self._turn_results.append(
                {"role": "tool", "name": self._asked.name, "content": str(last_result)}
            )
            self._asked = None
        if self._pending:
            return self._ask(self._pending.popleft())
        suffix = self._tool_suffix_ids(self._turn_results)
        self._turn_results = []
        context = self._prompt_ids + self._completion_ids + suffix
        used = len(context) - len(self._prompt_ids)
        limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        if used > self.max_completion_length or (limit and len(context) >= limit):
            return None  # TRL drops this round's results and ends the rollout here
        self._completion_ids += suffix
        parsed = self._generate(context, self.max_completion_length - used)
        return self._take_turn(parsed)

    def _take_turn(self, parsed: dict[str, Any]) -> ToolCall | None:
        self.final_text = str(parsed.get("content") or "")
        calls = parsed.get("tool_calls") or []
        if not calls or self._iterations >= self.max_iterations:
            return None
        self._iterations += 1
        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            if call.get("type") != "function" or not isinstance(function, Mapping):
                # TRL answers these with an error result and counts a failure; a name no tool
                # has gets the same from the episode player.
                self._pending.append(ToolCall("unsupported tool call type", {}))
                continue
            arguments = function.get("arguments")
            if not isinstance(arguments, Mapping):
                # TRL's `tool(**arguments)` raises on these: the call fails, as here.
                self._pending.append(
                    ToolCall(str(function.get("name", "")), {"arguments": arguments})
                )
                continue
            self._pending.append(ToolCall(str(function.get("name", "")), dict(arguments)))
        return self._ask(self._pending.popleft())

    def _ask(self, call: ToolCall) -> ToolCall:
        self._asked = call
        return call

    @torch.no_grad()
    def _generate(self, context: list[int], budget: int) -> dict[str, Any]:
        from trl.chat_template_utils import parse_response

        if budget <= 0:
            return {}
        tokenizer = self.tokenizer
        pad = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        input_ids = torch.tensor([context])
        sampling: dict[str, Any] = {"do_sample": False}
        if self.temperature is not None:
            # GRPOConfig's defaults: no top-k or top-p cut.
            sampling = {"do_sample": True, "temperature": self.temperature, "top_k": 0, "top_p": 1.0}
            if self.generator is not None:
                torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=self.generator)))
        output = self.model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=budget,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=pad,
            **sampling,
        )
        new = output[0, len(context) :].tolist()
        if tokenizer.eos_token_id in new:  # keep the stop token, as TRL's completion ids do
            new = new[: new.index(tokenizer.eos_token_id) + 1]
        self._completion_ids += new
        if not new:
            return {}
        if (
            getattr(tokenizer, "response_template", None) is None
            and getattr(tokenizer, "response_schema", None) is None
        ):
            return {"role": "assistant", "content": tokenizer.decode(new, skip_special_tokens=True)}
        return parse_response(tokenizer, new, prefix=context, tools=self.tools)

    def _tool_suffix_ids(self, tool_messages: list[dict[str, Any]]) -> list[int]:
        """TRL 1.16's `GRPOTrainer._get_tool_suffix_ids`, for a text-only model."""
        if not tool_messages:
            return []
        dummy = [
            {"role": "user", "content": "dummy"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": tool_messages[0]["name"], "arguments": {}},
                    }
                ],
            },
        ]
        render = self.tokenizer.apply_chat_template
        prefix = list(
            render(
                dummy,
                add_generation_prompt=False,
                tokenize=True,
                chat_template=self.chat_template,
                return_dict=False,
                **self.kwargs,
            )
        )
        full = list(
            render(
                dummy + tool_messages,
                add_generation_prompt=True,
                tokenize=True,
                chat_template=self.chat_template,
                return_dict=False,
                **self.kwargs,
            )
        )
        eos = [i for i, token in enumerate(prefix) if token == self.tokenizer.eos_token_id]
        if eos:
            prefix = prefix[: eos[-1] + 1]
        if full[: len(prefix)] != prefix:
            raise ValueError(
                "Unexpected tokenization: the EOS-trimmed prefix IDs are not a prefix of the full IDs."
            )
        return full[len(prefix) :]


def _row_messages(row: Mapping[str, Any], prompt: str) -> list[dict[str, Any]]:
    """The row's prompt messages with the last one's text as the episode player built it
    (reset text appended)."""
    given = row.get("prompt")
    if isinstance(given, list) and given:
        messages = [dict(message) for message in given]
        messages[-1] = {**messages[-1], "content": prompt}
        return messages
    return [{"role": "user", "content": prompt}]
