"""Evaluations end to end: a real Celery worker process plays them against the real echo
server (uvicorn) with the test variant of the demo model, the solver and the random policy."""

from __future__ import annotations

import csv
import io

import pytest

from tests.e2e.helpers import register_echo, wait_for
from webapp.evaluations.models import Evaluation, EvaluationEpisode

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _finished(api, evaluation_id: int, worker) -> dict:
    def done() -> dict | None:
        body = api.get(f"/api/evaluations/{evaluation_id}/").json()
        return body if body["status"] not in ("queued", "running") else None

    try:
        return wait_for(done, 240, f"evaluation {evaluation_id} to finish")
    except AssertionError:
        raise AssertionError(worker.log_text()[-6000:]) from None


def _recomputed(evaluation_id: int, labels: list[str]) -> list[dict]:
    """The table from the stored episodes, computed here by hand."""
    rows = []
    for index, label in enumerate(labels):
        played = list(
            EvaluationEpisode.objects.filter(evaluation_id=evaluation_id, model_index=index)
        )
        rows.append(
            {
                "model": label,
                "episodes": len(played),
                "mean_reward": sum(e.reward for e in played) / len(played),
                "wins": sum(e.won for e in played),
                "tool_calls": sum(e.tool_calls for e in played),
                "tool_failures": sum(e.tool_failures for e in played),
            }
        )
    return rows


def test_same_seed_and_models_give_the_same_table(api, outsider_api, echo_url, worker):
    env_id = register_echo(api, echo_url)
    request = {
        "environment": env_id,
        "models": ["solver", "random", "demo:echo"],
        "episodes": 4,
        "seed": 11,
        "max_completion_length": 64,
        "max_tool_calling_iterations": 2,
    }
    first = api.post("/api/evaluations/", request, format="json")
    assert first.status_code == 201, first.json()
    assert first.json()["progress"] == {"done": 0, "total": 12, "fraction": 0.0}
    one = _finished(api, first.json()["id"], worker)
    second = api.post("/api/evaluations/", request, format="json")
    assert second.status_code == 201, second.json()
    two = _finished(api, second.json()["id"], worker)

    assert (one["status"], one["error"], one["progress"]) == (
        "succeeded",
        "",
        {"done": 12, "total": 12, "fraction": 1.0},
    )
    assert two["status"] == "succeeded"
    assert one["results"] == two["results"]
    assert one["columns"] == [
        "model",
        "episodes",
        "mean_reward",
        "wins",
        "tool_calls",
        "tool_failures",
    ]
    labels = ["solver", "random", "demo:echo"]
    assert one["results"] == _recomputed(one["id"], labels)
    assert two["results"] == _recomputed(two["id"], labels)
    assert one["results"][0] == {
        "model": "solver",
        "episodes": 4,
        "mean_reward": 1.0,
        "wins": 4,
        "tool_calls": 4,
        "tool_failures": 0,
    }
    # Greedy decoding and seeded rows: the very same transcripts, episode by episode.
    transcripts = [
        list(
            EvaluationEpisode.objects.filter(evaluation_id=pk).values_list(
                "model_index", "index", "seed", "messages"
            )
        )
        for pk in (one["id"], two["id"])
    ]
    assert transcripts[0] == transcripts[1] and len(transcripts[0]) == 12

    page = api.get(f"/api/evaluations/{one['id']}/episodes/?model=2&page_size=3").json()
    assert (page["count"], page["page"], page["page_size"], len(page["results"])) == (4, 1, 3, 3)
    assert [e["index"] for e in page["results"]] == [0, 1, 2]
    assert all(e["model"] == "demo:echo" for e in page["results"])

    response = api.get(f"/api/evaluations/{one['id']}/results.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(response.content.decode())))
    assert table[0] == one["columns"]
    assert [row[0] for row in table[1:]] == labels
    assert table[1] == ["solver", "4", "1.0", "4", "4", "0"]

    # The outsider sees none of it.
    assert outsider_api.get(f"/api/evaluations/{one['id']}/").status_code == 404
    assert outsider_api.get(f"/api/evaluations/{one['id']}/episodes/").status_code == 404
    assert outsider_api.get(f"/api/evaluations/{one['id']}/results.csv").status_code == 404
    assert outsider_api.get("/api/evaluations/").json() == []
    assert Evaluation.objects.count() == 2
