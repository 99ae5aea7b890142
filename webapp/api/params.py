"""Pieces every API module shares: a bounded integer query parameter, and a streamed export."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from django.http import StreamingHttpResponse
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from webapp.runs.export import FORMATS, streamed

MEDIA_TYPES = {"jsonl": "application/x-ndjson", "parquet": "application/vnd.apache.parquet"}


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


class StreamedExportApi(APIView):
    """A GET whose body is streamed, not rendered: `format` is the view's own parameter
    (jsonl or parquet), not DRF's renderer switch, and errors are JSON."""

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[Any, str]:
        return JSONRenderer(), JSONRenderer.media_type

    def export(
        self, request: Request, *, writers: dict[str, Callable[[], Iterator[bytes]]], filename: str
    ) -> StreamingHttpResponse:
        fmt = request.query_params.get("format", "jsonl")
        if fmt not in FORMATS:
            raise ValidationError({"format": [f"use one of {', '.join(FORMATS)}"]})
        response = StreamingHttpResponse(streamed(writers[fmt]()), content_type=MEDIA_TYPES[fmt])
        response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
        return response
