"""Rollouts exported as JSONL and Parquet match what the rollouts API says, row for row."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest

from tests.factories import RunFactory
from webapp.runs.models import Rollout, Run
from webapp.runs.telemetry import export

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


@pytest.fixture
def run(owner) -> Run:
    config = {"rewards": [
        {"name": "win", "kind": "success_bonus"},
        {"name": "tree", "kind": "gate", "terms": [{"name": "inner", "kind": "env_reward"}]},
    ]}
    run = RunFactory(owner=owner, name="r", config=config)
    for seq in range(1, 8):
        Rollout.objects.create(
            run=run, seq=seq, step=(seq + 1) // 2, env="wordle",
            prompt=[{"role": "user", "content": f"Play {seq}"}],
            messages=[
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "guess", "arguments": {"guess": "crane"}}}]},
                {"role": "tool", "name": "guess", "content": f"XXGYX {XSS}"},
                {"role": "assistant", "content": "done"},
            ],
            rewards={"win": seq / 10, "tree": None if seq == 3 else 1.0, "inner": 0.5},
            reward=seq / 10 + 1.0, advantage=seq - 4.0, unscored=seq == 7,
        )
    return run


def _body(response) -> bytes:
    """The streamed body: an async iterator (what the ASGI server sends chunk by chunk)."""
    from asgiref.sync import async_to_sync

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()


def _api_rollouts(api, run) -> list[dict]:
    rows, url = [], f"/api/runs/{run.pk}/rollouts/?limit=3"
    while url:
        page = api.get(url).json()
        rows += page["results"]
        url = page["next"]
    return rows


def test_parquet_has_every_rollout_with_the_apis_per_term_rewards(api, run, monkeypatch):
    monkeypatch.setattr(export, "PAGE_ROWS", 3)  # several row groups
    response = api.get(f"/api/runs/{run.pk}/rollouts/export/?format=parquet")
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-rollouts.parquet"'
    table = pq.read_table(io.BytesIO(_body(response)))
    assert table.num_rows == 7
    file = pq.ParquetFile(io.BytesIO(_body(api.get(f"/api/runs/{run.pk}/rollouts/export/?format=parquet"))))
    assert file.num_row_groups == 3
    rows = table.to_pylist()
    from_api = _api_rollouts(api, run)
    assert [r["seq"] for r in rows] == [r["seq"] for r in from_api] == list(range(1, 8))
    assert [r["rewards"] for r in rows] == [
        {name: r["rewards"].get(name) for name in ("win", "tree", "inner")} for r in from_api
    ]
    assert [r["advantage"] for r in rows] == [r["advantage"] for r in from_api]
    first = rows[0]
    assert first["tool_calls"] == [{"turn": 0, "name": "guess", "arguments": '{"guess": "crane"}', "result": f"XXGYX {XSS}"}]
    assert first["messages"][1] == {"role": "tool", "content": f"XXGYX {XSS}", "name": "guess", "tool_calls": None}
    assert (first["run"], first["env"], first["seed"], rows[6]["unscored"]) == (run.pk, "wordle", None, True)


def test_jsonl_has_one_line_per_rollout(api, run):
    response = api.get(f"/api/runs/{run.pk}/rollouts/export/")
    assert response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in _body(response).splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, 8))
    assert lines[2]["rewards"] == {"win": 0.3, "tree": None, "inner": 0.5}
    assert lines[0]["messages"][0]["tool_calls"][0]["function"]["arguments"] == {"guess": "crane"}


def test_datasets_loads_the_parquet(api, run, tmp_path):
    from datasets import load_dataset

    path = tmp_path / "r.parquet"
    path.write_bytes(_body(api.get(f"/api/runs/{run.pk}/rollouts/export/?format=parquet")))
    loaded = load_dataset("parquet", data_files=str(path), split="train")
    assert loaded.num_rows == 7
    assert loaded[1]["rewards"] == {"win": 0.2, "tree": 1.0, "inner": 0.5}


def test_an_unknown_format_and_other_users_runs_are_refused(api, outsider_api, run):
    bad = api.get(f"/api/runs/{run.pk}/rollouts/export/?format=xml")
    assert (bad.status_code, bad.json()) == (400, {"format": ["use one of jsonl, parquet"]})
    assert outsider_api.get(f"/api/runs/{run.pk}/rollouts/export/?format=jsonl").status_code == 404


def test_an_empty_run_exports_an_empty_file(api, owner):
    empty = RunFactory(owner=owner, name="e", max_steps=1)
    body = _body(api.get(f"/api/runs/{empty.pk}/rollouts/export/?format=parquet"))
    assert pq.read_table(io.BytesIO(body)).num_rows == 0
    assert _body(api.get(f"/api/runs/{empty.pk}/rollouts/export/")) == b""


def test_the_run_page_links_both_exports_and_the_session_may_fetch_them(client, owner, run):
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    for fmt in ("jsonl", "parquet"):
        assert f'href="/api/runs/{run.pk}/rollouts/export/?format={fmt}"' in page
    assert len(_body(client.get(f"/api/runs/{run.pk}/rollouts/export/?format=jsonl")).splitlines()) == 7
