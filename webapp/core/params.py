"""A bounded integer query parameter, read the same way by every API."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.request import Request


def int_param(request: Request, name: str, default: int | None, lo: int, hi: int) -> int | None:
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
