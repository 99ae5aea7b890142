"""Query parameters (bounded integers, numbers, booleans, text), read the same way by every API."""

from __future__ import annotations

import math
from typing import overload

from rest_framework.exceptions import ValidationError
from rest_framework.request import Request


@overload
def int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int: ...
@overload
def int_param(request: Request, name: str, default: int | None, lo: int, hi: int) -> int | None: ...
def int_param(request: Request, name: str, default: int | None, lo: int, hi: int) -> int | None:
    """The parameter `name` as an integer in [lo, hi], or `default` when it is absent or empty
    (so an int default gives an int)."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({name: [f"'{raw}' is not an integer"]}) from None
    if not lo <= value <= hi:
        raise ValidationError({name: [f"must be between {lo} and {hi}"]})
    return value


def float_param(request: Request, name: str) -> float | None:
    """A finite number, or None when the parameter is absent or empty."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValidationError({name: [f"'{raw}' is not a number"]}) from None
    if not math.isfinite(value):
        raise ValidationError({name: ["must be a finite number"]})
    return value


def bool_param(request: Request, name: str) -> bool | None:
    """`true` or `false` (also 1/0), or None when the parameter is absent or empty."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    value = {"true": True, "1": True, "false": False, "0": False}.get(str(raw).lower())
    if value is None:
        raise ValidationError({name: [f"'{raw}' is not true or false"]})
    return value


def text_param(request: Request, name: str, max_length: int) -> str | None:
    """Text of at most `max_length` characters, stripped; None when absent or blank."""
    raw = (request.query_params.get(name) or "").strip()
    if not raw:
        return None
    if len(raw) > max_length or "\x00" in raw:
        raise ValidationError({name: [f"must be at most {max_length} characters of text"]})
    return raw
