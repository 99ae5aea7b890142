"""A run's metric points, raw, as CSV or Parquet: every point of the keys asked for (all of the
run's keys when none is), none bucketed or left out, null values included, streamed in keyset
pages by (key, step) over the (run, key, step, value) index, so a long run never sits in memory
whole. Columns: step, key, value (empty in CSV, null in Parquet, where a step logged none)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from django.db.models import Q

from webapp.core.export import rows_parquet
from webapp.runs.models import MetricPoint, Run

PAGE_ROWS = 2000
COLUMNS = ("step", "key", "value")


def metric_point_pages(*, run: Run, keys: list[str] | None) -> Iterator[list[dict[str, Any]]]:
    """The run's points of `keys` (every key when empty or None), by key then step, a page at
    a time."""
    points = MetricPoint.objects.filter(run=run)
    if keys:
        points = points.filter(key__in=sorted(set(keys)))
    after: tuple[str, int] | None = None
    while True:
        page_query = points
        if after is not None:
            key, step = after
            page_query = points.filter(Q(key__gt=key) | Q(key=key, step__gt=step))
        page = list(page_query.order_by("key", "step").values(*COLUMNS)[:PAGE_ROWS])
        if not page:
            return
        yield page
        after = (page[-1]["key"], page[-1]["step"])


def metrics_csv(*, run: Run, keys: list[str] | None) -> Iterator[bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for page in metric_point_pages(run=run, keys=keys):
        for point in page:
            # repr keeps every digit of the float; a null value is an empty field.
            value = point["value"]
            writer.writerow((point["step"], point["key"], "" if value is None else repr(value)))
        yield buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():  # the header of a run with no points
        yield buffer.getvalue().encode()


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([("step", pa.int64()), ("key", pa.string()), ("value", pa.float64())])


def metrics_parquet(*, run: Run, keys: list[str] | None) -> Iterator[bytes]:
    return rows_parquet(_schema(), metric_point_pages(run=run, keys=keys))
