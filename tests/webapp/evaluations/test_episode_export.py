"""An evaluation's episodes exported as JSONL and Parquet, matching the episodes API."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest

from tests.api.test_rollout_export import _body
from tests.e2e.helpers import register_echo
from webapp.evaluations.models import EvaluationEpisode
from webapp.runs.telemetry import export

pytestmark = pytest.mark.django_db


@pytest.fixture
def evaluation(api, echo_url) -> int:
    env_id = register_echo(api, echo_url)
    created = api.post(
        "/api/evaluations/", {"environment": env_id, "models": ["solver", "random"], "episodes": 3}, format="json"
    ).json()
    for model_index, model in enumerate(("solver", "random")):
        for index in range(3):
            EvaluationEpisode.objects.create(
                evaluation_id=created["id"], model_index=model_index, model=model, index=index, seed=100 + index,
                messages=[
                    {"role": "user", "content": "Echo 'hi'."},
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"type": "function", "function": {"name": "echo", "arguments": {"message": "hi"}}}]},
                    {"role": "tool", "name": "echo", "content": "<img src=x onerror=alert(1)>"},
                ],
                reward=1.0 - model_index, won=model_index == 0, tool_calls=1, tool_failures=model_index,
                attributes={"won": 1.0 - model_index, "reward": 1.0 - model_index},
            )
    return int(created["id"])


def test_parquet_and_jsonl_hold_every_episode_in_the_apis_order(api, evaluation, monkeypatch):
    monkeypatch.setattr(export, "PAGE_ROWS", 4)  # pages that cross from one model to the next
    table = pq.read_table(io.BytesIO(_body(api.get(f"/api/evaluations/{evaluation}/episodes/export/?format=parquet"))))
    rows = table.to_pylist()
    listed = api.get(f"/api/evaluations/{evaluation}/episodes/?page_size=100").json()["results"]
    assert [(r["model"], r["index"], r["seed"], r["reward"]) for r in rows] == [
        (e["model"], e["index"], e["seed"], e["reward"]) for e in listed
    ]
    assert len(rows) == 6
    assert rows[3]["tool_calls"] == [
        {"turn": 1, "name": "echo", "arguments": '{"message": "hi"}', "result": "<img src=x onerror=alert(1)>"}
    ]
    assert json.loads(rows[3]["attributes"]) == {"reward": 0.0, "won": 0.0}
    lines = [json.loads(line) for line in _body(api.get(f"/api/evaluations/{evaluation}/episodes/export/")).splitlines()]
    assert [(line["model_index"], line["index"]) for line in lines] == [(m, i) for m in (0, 1) for i in range(3)]


def test_other_users_and_bad_formats_are_refused(api, outsider_api, evaluation):
    assert outsider_api.get(f"/api/evaluations/{evaluation}/episodes/export/").status_code == 404
    bad = api.get(f"/api/evaluations/{evaluation}/episodes/export/?format=csv")
    assert (bad.status_code, bad.json()) == (400, {"format": ["use one of jsonl, parquet"]})


def test_the_evaluation_page_links_both_exports(client, owner, evaluation):
    client.force_login(owner)
    page = client.get(f"/evaluations/{evaluation}/").content.decode()
    for fmt in ("jsonl", "parquet"):
        assert f'href="/api/evaluations/{evaluation}/episodes/export/?format={fmt}"' in page
