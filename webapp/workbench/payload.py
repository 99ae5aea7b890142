"""A request's JSON body read into a pydantic model, with pydantic's errors as the API's
`{dotted field path: [messages]}` (what an `InvalidInput` carries)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def field_errors(exc: ValidationError) -> dict[str, list[str]]:
    """Each error under its dotted location ("non_field_errors" for the body as a whole), with
    the "Value error, " pydantic puts before a validator's own message taken off."""
    errors: dict[str, list[str]] = {}
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"]) or "non_field_errors"
        errors.setdefault(key, []).append(error["msg"].removeprefix("Value error, "))
    return errors


def parse_body(model: type[M], data: Any, rejected: Callable[[dict[str, list[str]]], Exception]) -> M:
    """`data` as a `model`; anything else than a JSON object, or one the model refuses, raises
    `rejected(errors)`."""
    if not isinstance(data, dict):
        raise rejected({"non_field_errors": ["expected a JSON object"]})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise rejected(field_errors(exc)) from None


def parse_extras(model: type[M], data: dict[str, Any], errors: dict[str, list[str]]) -> M:
    """`data` as a `model` of a request's own fields, read beside another parser: what it
    refuses is added to `errors` (reported together) and its defaults stand in."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for key, messages in field_errors(exc).items():
            errors.setdefault(key, []).extend(messages)
        return model()
