"""The export through the real ASGI server: sent in chunks as pages are read, not as one body."""

from __future__ import annotations

import io
import urllib.request

import pyarrow.parquet as pq
import pytest
from knox.models import AuthToken

from tests.factories import RunFactory
from webapp.runs.models import Rollout
from webapp.runs.telemetry import export

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_parquet_streams_in_chunks_over_asgi(owner, web):
    run = RunFactory(
        owner=owner, name="r", config={"rewards": [{"name": "env_reward"}]}, max_steps=1,
    )
    Rollout.objects.bulk_create([
        Rollout(run=run, seq=seq, step=1, env="echo", prompt=[{"role": "user", "content": "hi"}],
                messages=[{"role": "assistant", "content": "x" * 2000}], rewards={"env_reward": 1.0}, reward=1.0)
        for seq in range(1, 2 * export.PAGE_ROWS + 2)
    ])
    _, token = AuthToken.objects.create(user=owner)
    request = urllib.request.Request(
        f"{web}/api/runs/{run.pk}/rollouts/export/?format=parquet", headers={"Authorization": f"Token {token}"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # the test's own server
        assert response.headers["Transfer-Encoding"] == "chunked"
        assert response.headers.get("Content-Length") is None
        body = response.read()
    table = pq.read_table(io.BytesIO(body))
    assert table.num_rows == 2 * export.PAGE_ROWS + 1
    assert pq.ParquetFile(io.BytesIO(body)).num_row_groups == 3
