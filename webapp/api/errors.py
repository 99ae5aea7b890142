"""One exception handler: domain errors become 400s that name the field to fix."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from webapp.catalog.services import EnvironmentRejected
from webapp.runs.config import RunConfigError
from webapp.runs.services import RunStateError


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RunConfigError | EnvironmentRejected):
        return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, RunStateError):
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    return drf_exception_handler(exc, context)
