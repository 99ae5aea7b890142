"""Pages and API answers while the database is away: a 503 that says so, never a traceback.

A lost database raises `OperationalError` (connection refused, the server shutting down, a
lock timeout) or `InterfaceError` (a connection already closed) wherever the first query
happens: in a view, or in a middleware below this one (the session saved on the way out, the
login lockout). A view's exception reaches `process_exception`; one raised in a middleware
below is turned into a 500 by Django before it gets here (its technical page when DEBUG is
on), so `got_request_exception` marks the request and `process_response` replaces that 500.

The answer renders no template that reads the database (no context processors, no user):
a short HTML page, or `{"detail": ...}` under /api/, with `Retry-After`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.deprecation import MiddlewareMixin

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 10
DETAIL = (
    "The database is unreachable or not answering; the lab retries on its own. Try again in a few seconds "
    "(training runs keep going and store their telemetry when the database is back)."
)
_MARK = "_envlab_database_error"
SQLITE_SCHEMA_ERRORS = ("no such table", "no such column", "no such function")


def database_outage(exc: BaseException | None) -> bool:
    """Whether `exc` (or what it was raised from) is the database out of reach or not answering
    in time. Not SQLite's schema errors, which it also raises as OperationalError: a missing
    table is a bug or a missed migration, and waiting will not fix it."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, InterfaceError):
            return True
        if isinstance(exc, OperationalError):
            return not str(exc).startswith(SQLITE_SCHEMA_ERRORS) and " has no column " not in str(
                exc
            )
        exc = exc.__cause__
        seen += 1
    return False


def database_unavailable_response(request: HttpRequest) -> HttpResponse:
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": DETAIL}, status=503)
    else:
        html = render_to_string("503_database.html", {"retry_after": RETRY_AFTER_SECONDS})
        response = HttpResponse(html, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    response["X-Frame-Options"] = "DENY"
    return response


def _mark_request(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    # Sent from inside Django's `except` block: the exception being handled is the current one.
    if request is not None and database_outage(sys.exc_info()[1]):
        setattr(request, _MARK, True)


got_request_exception.connect(_mark_request, dispatch_uid="envlab-database-outage")


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """Listed right after the security and static-file middleware: every layer that may
    query the database is below it."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not database_outage(exception):
            return None
        log.warning("%s %s: database unreachable: %s", request.method, request.path, exception)
        return database_unavailable_response(request)

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.status_code == 500 and getattr(request, _MARK, False):
            return database_unavailable_response(request)
        return response
