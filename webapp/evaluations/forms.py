"""Reading the evaluation forms' plain fields (the evaluations page and the arena's side by
side post the same shapes): model lines, whole numbers, errors as lines."""

from __future__ import annotations

import re
from typing import Any

from webapp.core.errors import InvalidInput

_CHECKPOINT_LINE = re.compile(r"^run:([0-9]{1,12})(?:@([0-9]{1,9}|last))?$")


def model_line(line: str) -> str | dict[str, Any]:
    match = _CHECKPOINT_LINE.fullmatch(line)
    if match is None:
        return line
    step = match.group(2) or "last"
    return {"run": int(match.group(1)), "checkpoint": step if step == "last" else int(step)}


def int_field(raw: str, default: int) -> Any:
    raw = raw.strip()
    if not raw:
        return default
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 12 else raw


def errors_as_lines(exc: InvalidInput) -> list[str]:
    return [
        f"{key}: {message}" for key, key_messages in exc.errors.items() for message in key_messages
    ]
