"""Transcript messages as the pages show them: role, name, plain-text content and tool calls
with their arguments as compact JSON (the run page's feed, webapp/static/js/rollout_list.js, writes the
same). Pure: the run page and the prompt timeline share it; templates escape the text."""

from __future__ import annotations

import json
from typing import Any


def _text(content: Any) -> str:
    """Message content as plain text: a string, or the text parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
            else:
                parts.append(json.dumps(part))
        return "\n".join(parts)
    return json.dumps(content)


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    # Compact, as the live page's JSON.stringify writes it.
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def _message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {"role": "?", "name": "", "content": _text(message), "tool_calls": []}
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        calls.append(
            {
                "name": str(function.get("name", "")),
                "arguments": _arguments(function.get("arguments", "")),
            }
        )
    return {
        "role": str(message.get("role", "?")),
        "name": str(message.get("name") or ""),
        "content": _text(message.get("content")),
        "tool_calls": calls,
    }


def transcript_messages(value: Any) -> list[dict[str, Any]]:
    """Stored messages (a list, or a bare prompt string) as the pages show them."""
    if isinstance(value, str):
        return [{"role": "user", "name": "", "content": value, "tool_calls": []}]
    return [_message(m) for m in value] if isinstance(value, list) else []
