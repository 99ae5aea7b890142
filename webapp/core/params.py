"""Query parameters (bounded integers, numbers, booleans, text), read the same way by every API."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar, overload

from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

T = TypeVar("T")


def _parsed(request: Request, name: str, parse: Callable[[str], T], what: str) -> T | None:
    """The parameter `name` read by `parse`, or None when it is absent or empty; `what` names
    the kind of value in the refusal of one `parse` cannot read."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    try:
        return parse(raw)
    except ValueError:
        raise ValidationError({name: [f"'{raw}' is not {what}"]}) from None


@overload
def int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int: ...
@overload
def int_param(request: Request, name: str, default: int | None, lo: int, hi: int) -> int | None: ...
def int_param(request: Request, name: str, default: int | None, lo: int, hi: int) -> int | None:
    """The parameter `name` as an integer in [lo, hi], or `default` when it is absent or empty
    (so an int default gives an int)."""
    value = _parsed(request, name, int, "an integer")
    if value is None:
        return default
    if not lo <= value <= hi:
        raise ValidationError({name: [f"must be between {lo} and {hi}"]})
    return value


def float_param(request: Request, name: str) -> float | None:
    """A finite number, or None when the parameter is absent or empty."""
    value = _parsed(request, name, float, "a number")
    if value is not None and not math.isfinite(value):
        raise ValidationError({name: ["must be a finite number"]})
    return value


def bool_param(request: Request, name: str) -> bool | None:
    """`true` or `false` (also 1/0), or None when the parameter is absent or empty."""
    return _parsed(request, name, _boolean, "true or false")


def _boolean(raw: str) -> bool:
    value = {"true": True, "1": True, "false": False, "0": False}.get(raw.lower())
    if value is None:
        raise ValueError(raw)
    return value


def text_param(request: Request, name: str, max_length: int) -> str | None:
    """Text of at most `max_length` characters, stripped; None when absent or blank."""
    raw = (request.query_params.get(name) or "").strip()
    if not raw:
        return None
    if len(raw) > max_length or "\x00" in raw:
        raise ValidationError({name: [f"must be at most {max_length} characters of text"]})
    return raw
