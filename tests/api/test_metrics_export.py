"""GET /api/runs/<id>/metrics/export/: every stored point, raw (no bucketing), as CSV or Parquet,
streamed in pages; only to those who may see the run."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
import pytest

from tests.factories import RunFactory
from webapp.runs.models import MetricPoint, Run
from webapp.runs.telemetry import metrics_export

pytestmark = pytest.mark.django_db


def _body(response) -> bytes:
    """The streamed body: an async iterator (what the ASGI server sends chunk by chunk)."""
    from asgiref.sync import async_to_sync

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()


@pytest.fixture
def run(owner) -> Run:
    """1,200 reward points (more than the chart API's 500 buckets), a loss with a null step,
    and a bookkeeping key; another run's points must never show."""
    run = RunFactory(owner=owner, name="r", max_steps=1200)
    points = [MetricPoint(run=run, step=s, key="reward", value=s / 1000, seq=s) for s in range(1, 1201)]
    points += [MetricPoint(run=run, step=1, key="loss", value=0.25, seq=2000),
               MetricPoint(run=run, step=2, key="loss", value=None, seq=2001),
               MetricPoint(run=run, step=1, key="_step_seconds", value=1.5, seq=2002)]
    other = RunFactory(owner=owner, name="o", max_steps=1)
    points.append(MetricPoint(run=other, step=1, key="reward", value=9.0, seq=1))
    MetricPoint.objects.bulk_create(points)
    return run


def test_csv_has_every_point_of_the_key_in_step_order(api, run, monkeypatch):
    monkeypatch.setattr(metrics_export, "PAGE_ROWS", 100)  # many pages, each its own chunk
    response = api.get(f"/api/runs/{run.pk}/metrics/export/?key=reward&format=csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-metrics.csv"'
    chunks = []
    from asgiref.sync import async_to_sync

    async def collect() -> None:
        async for chunk in response.streaming_content:
            chunks.append(chunk)

    async_to_sync(collect)()
    lines = b"".join(chunks).decode().splitlines()
    assert len(chunks) == 12
    assert lines[0] == "step,key,value"
    assert lines[1:] == [f"{s},reward,{s / 1000!r}" for s in range(1, 1201)]


def test_no_key_exports_every_key_nulls_included_and_csv_is_the_default(api, run):
    body = _body(api.get(f"/api/runs/{run.pk}/metrics/export/")).decode()
    lines = body.splitlines()
    assert len(lines) == 1 + 1200 + 3
    assert lines[1:4] == ["1,_step_seconds,1.5", "1,loss,0.25", "2,loss,"]
    assert lines[4] == "1,reward,0.001"


def test_parquet_has_the_same_points(api, run, monkeypatch):
    monkeypatch.setattr(metrics_export, "PAGE_ROWS", 500)
    response = api.get(f"/api/runs/{run.pk}/metrics/export/?key=reward&key=loss&format=parquet")
    assert response["Content-Type"] == "application/vnd.apache.parquet"
    body = _body(response)
    table = pq.read_table(io.BytesIO(body))
    assert table.column_names == ["step", "key", "value"]
    rows = table.to_pylist()
    assert rows[:2] == [{"step": 1, "key": "loss", "value": 0.25}, {"step": 2, "key": "loss", "value": None}]
    assert rows[2:] == [{"step": s, "key": "reward", "value": s / 1000} for s in range(1, 1201)]
    assert pq.ParquetFile(io.BytesIO(body)).num_row_groups == 3


def test_an_unknown_key_or_an_empty_run_gives_the_header_alone(api, run, owner):
    assert _body(api.get(f"/api/runs/{run.pk}/metrics/export/?key=nope")) == b"step,key,value\n"
    empty = RunFactory(owner=owner, name="e", max_steps=1)
    assert _body(api.get(f"/api/runs/{empty.pk}/metrics/export/?format=csv")) == b"step,key,value\n"
    table = pq.read_table(io.BytesIO(_body(api.get(f"/api/runs/{empty.pk}/metrics/export/?format=parquet"))))
    assert table.num_rows == 0


def test_an_unknown_format_is_refused(api, run):
    response = api.get(f"/api/runs/{run.pk}/metrics/export/?format=jsonl")
    assert (response.status_code, response.json()) == (400, {"format": ["use one of csv, parquet"]})


def test_who_may_export(api, operator_api, staff_api, outsider_api, run, client):
    url = f"/api/runs/{run.pk}/metrics/export/?key=loss"
    expected = b"step,key,value\n1,loss,0.25\n2,loss,\n"
    assert _body(api.get(url)) == expected
    # An operator holds runs.view_run: they see every run, as on the run's other endpoints.
    assert _body(operator_api.get(url)) == expected
    # Staff without that permission and another user get the 404 of a run that does not exist.
    for other in (staff_api, outsider_api):
        response = other.get(url)
        assert (response.status_code, response.json()) == (404, {"detail": "No Run matches the given query."})
    assert client.get(url).status_code in (401, 403)
