"""Streamed downloads (JSONL, CSV, Parquet) shared by the run and evaluation exports: rows are
written page by page as they come, so a large export never sits in memory whole."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

FORMATS = ("jsonl", "parquet")
MEDIA_TYPES = {
    "jsonl": "application/x-ndjson",
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
}


class _Chunks:
    """A write-only file for pyarrow that hands back what was written since the last take."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data, self.parts = b"".join(self.parts), []
        return data


def rows_parquet(schema: Any, rows: Iterable[list[dict[str, Any]]]) -> Iterator[bytes]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = _Chunks()
    with pq.ParquetWriter(pa.PythonFile(sink, mode="w"), schema) as writer:
        for page in rows:
            writer.write_table(pa.Table.from_pylist(page, schema=schema))
            chunk = sink.take()
            if chunk:
                yield chunk
    yield sink.take()


def streamed(chunks: Iterator[bytes]) -> Any:
    """`chunks` as an async iterator: under ASGI, Django would read a plain iterator whole
    into memory before sending it. Each chunk (its database page) is made in Django's sync
    thread."""
    from asgiref.sync import sync_to_async

    done = object()

    def advance() -> object:  # a chunk, or `done`
        return next(chunks, done)

    async def stream() -> Any:
        while True:
            chunk = await sync_to_async(advance, thread_sensitive=True)()
            if chunk is done:
                return
            yield chunk

    return stream()


# The schema of a GET that streams one object's rows as JSON lines (the default) or Parquet.
rows_export_schema = extend_schema(
    parameters=[OpenApiParameter("format", str, enum=list(FORMATS))],
    responses={(200, MEDIA_TYPES["jsonl"]): bytes, (200, MEDIA_TYPES["parquet"]): bytes},
)


def rows_writers(
    obj: Any, jsonl: Callable[[Any], Iterator[bytes]], parquet: Callable[[Any], Iterator[bytes]]
) -> dict[str, Callable[[], Iterator[bytes]]]:
    """`StreamedExportApi.export`'s writers of `obj`'s rows in FORMATS."""
    return {"jsonl": lambda: jsonl(obj), "parquet": lambda: parquet(obj)}


class StreamedExportApi(APIView):
    """A GET whose body is streamed, not rendered: `format` is the view's own parameter
    (one of the `writers` it is given, the first by default), not DRF's renderer switch, and
    errors are JSON."""

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[Any, str]:
        return JSONRenderer(), JSONRenderer.media_type

    def export(
        self, request: Request, *, writers: dict[str, Callable[[], Iterator[bytes]]], filename: str
    ) -> StreamingHttpResponse:
        fmt = request.query_params.get("format", next(iter(writers)))
        if fmt not in writers:
            raise ValidationError({"format": [f"use one of {', '.join(writers)}"]})
        response = StreamingHttpResponse(streamed(writers[fmt]()), content_type=MEDIA_TYPES[fmt])
        response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
        return response
