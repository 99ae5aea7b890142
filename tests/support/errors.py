"""Exceptions as the code under test meets them."""

from __future__ import annotations

from typing import TypeVar

E = TypeVar("E", bound=BaseException)


def raised_from(outer: E, inner: BaseException) -> E:
    """``outer`` as it is caught after ``raise outer from inner`` inside a handler of ``inner``:
    its cause, context and traceback set, as a library's wrapping leaves them."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as final:
        return final  # type: ignore[return-value]
