"""The application's error bases and the one DRF exception handler that maps them.

An app raises a subclass of `InvalidInput` (a 400 naming each field to fix) or of
`StateConflict` (a 409: the request does not fit the object's state); the handler needs
to know no app's own classes, so it sits below all of them.
"""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class InvalidInput(Exception):
    """Input was refused; `errors` maps dotted field paths to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


class StateConflict(Exception):
    """The request does not fit the object's current state (cancel a finished run...)."""


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, InvalidInput):
        return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, StateConflict):
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    return drf_exception_handler(exc, context)
