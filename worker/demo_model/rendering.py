"""Chat-template rendering with the return type each call asks for.

`apply_chat_template` returns text, ids or an encoding depending on its flags, and is typed
as the union of them all; these wrappers make the flag and the type agree in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from transformers import BatchEncoding, PreTrainedTokenizerBase

# What transformers and TRL take as `tools`: JSON schemas or Python functions.
TemplateTools = list[dict[Any, Any] | Callable[..., Any]]
Conversation = list[dict[str, Any]]


def template_tools(tools: Sequence[dict[str, Any] | Callable[..., Any]]) -> TemplateTools:
    return list(tools)


def chat_text(
    tokenizer: PreTrainedTokenizerBase, conversation: Conversation, *,
    tools: Sequence[dict[str, Any] | Callable[..., Any]], **options: Any,
) -> str:
    text = tokenizer.apply_chat_template(conversation, tools=template_tools(tools), tokenize=False, **options)
    if not isinstance(text, str):
        raise TypeError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}, not text")
    return text


def chat_encoding(
    tokenizer: PreTrainedTokenizerBase, conversation: Conversation, *,
    tools: Sequence[dict[str, Any] | Callable[..., Any]], **options: Any,
) -> BatchEncoding:
    rendered = tokenizer.apply_chat_template(
        conversation, tools=template_tools(tools), tokenize=True, return_dict=True, **options
    )
    if not isinstance(rendered, BatchEncoding):
        raise TypeError(f"apply_chat_template(return_dict=True) returned {type(rendered).__name__}")
    return rendered
