"""Stored transcripts (a run's rollouts, an evaluation's episodes) have a size cap
(ENVLAB_MAX_EPISODE_BYTES, security review N4): a server that answers 64 KB on every call and
never ends the episode made one reference-policy episode of 150 calls 9.9 MB. Past the cap the
head and the tail of the conversation are kept, with one message in between saying what was
cut; a single message too long for its share keeps the head and the tail of its text."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

CUT_ROLE = "system"


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def _clip_message(message: Any, limit: int) -> Any:
    if not isinstance(message, dict) or _size(message) <= limit:
        return message
    content = message.get("content")
    if isinstance(content, str):
        keep = max(0, limit // 2 - 200)
        half = keep // 2
        clipped = f"{content[:half]}\n[… {len(content) - 2 * half} characters cut by the lab …]\n{content[-half:] if half else ''}"
        message = {**message, "content": clipped}
    if _size(message) <= limit:
        return message
    # Anything else too big (tool-call arguments, a list of parts): its role and a note.
    return {"role": message.get("role", "tool"), "content": f"[a message of {_size(message)} bytes cut by the lab]"}


def cap_transcript(messages: Any, limit: int | None = None) -> Any:
    """`messages` within `limit` bytes of JSON (default ENVLAB_MAX_EPISODE_BYTES), or as given
    when it fits (or is not a list)."""
    limit = int(settings.ENVLAB_MAX_EPISODE_BYTES if limit is None else limit)
    if not isinstance(messages, list) or _size(messages) <= limit:
        return messages
    per_message = max(1024, limit // 8)
    clipped = [_clip_message(m, per_message) for m in messages]
    if _size(clipped) <= limit:
        return clipped
    budget = limit - 400  # the marker's own size
    head: list[Any] = []
    tail: list[Any] = []
    used = 0
    low, high = 0, len(clipped) - 1
    take_head = True
    while low <= high:
        candidate = clipped[low] if take_head else clipped[high]
        size = _size(candidate) + 2
        if used + size > budget:
            break
        used += size
        if take_head:
            head.append(candidate)
            low += 1
        else:
            tail.insert(0, candidate)
            high -= 1
        take_head = not take_head
    cut = high - low + 1
    marker = {
        "role": CUT_ROLE,
        "content": f"[… {cut} message(s) cut by the lab: the transcript was over "
        f"{limit} bytes (ENVLAB_MAX_EPISODE_BYTES); its first and last messages are kept …]",
    }
    return [*head, marker, *tail]
