"""The evaluation pages: the list and its form, one evaluation's table, chart and escaped
transcripts, and "evaluate checkpoints" from a run's page. The echo server is real (uvicorn)."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from tests.e2e.helpers import register_echo
from tests.factories import EvaluationEpisodeFactory
from tests.support.trained_runs import two_step_run_with_checkpoint
from webapp.evaluations.models import Evaluation, EvaluationEpisode

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


def test_the_form_queues_an_evaluation(owner_client, api, echo_url):
    env_id = register_echo(api, echo_url)
    page = owner_client.get("/evaluations/")
    assert page.status_code == 200
    assert (
        b'id="evaluation-form"' in page.content
        and b'aria-current="page">Evaluations<' in page.content
    )
    response = owner_client.post(
        "/evaluations/",
        {
            "environment": str(env_id),
            "models": "solver\r\nrandom\r\n",
            "episodes": "3",
            "seed": "9",
        },
    )
    evaluation = Evaluation.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/evaluations/{evaluation.pk}/"
    assert ([e["label"] for e in evaluation.model_specs], evaluation.episodes, evaluation.seed) == (
        ["solver", "random"],
        3,
        9,
    )


def test_form_errors_are_shown_escaped_and_write_nothing(owner_client, api, echo_url):
    env_id = register_echo(api, echo_url)
    response = owner_client.post(
        "/evaluations/", {"environment": str(env_id), "models": XSS, "episodes": "500"}
    )
    assert response.status_code == 400
    assert XSS.encode() not in response.content
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in response.content
    assert b"episodes: Input should be less than or equal to 200" in response.content
    assert Evaluation.objects.count() == 0


def test_the_page_shows_the_table_and_escaped_transcripts(
    owner_client, api, owner, outsider, echo_url
):
    env_id = register_echo(api, echo_url)
    made = api.post(
        "/api/evaluations/",
        {"environment": env_id, "models": ["solver"], "episodes": 1},
        format="json",
    )
    pk = made.json()["id"]
    EvaluationEpisodeFactory(
        evaluation_id=pk,
        seed=1,
        tool_calls=1,
        messages=[{"role": "user", "content": "Echo 'x'."}, {"role": "assistant", "content": XSS}],
    )
    page = owner_client.get(f"/evaluations/{pk}/")
    assert page.status_code == 200
    body = page.content.decode()
    assert (
        XSS not in body
    )  # the transcript travels as JSON inside a script tag, rendered as text by JS
    data = json.loads(
        re.search(r'id="episodes-data" type="application/json">(.*?)</script>', body).group(1)
    )
    assert data[0]["messages"][1]["content"] == XSS
    assert f'href="/evaluations/{pk}/results.csv"' in body
    assert re.search(
        r'<td data-value="solver"><code>solver</code></td>\s*<td data-value="1">1</td>\s*<td data-value="1.0">1</td>',
        body,
    )
    assert (
        owner_client.get(f"/evaluations/{pk}/results.csv").content.decode().splitlines()[1]
        == "solver,1,1.0,1,1,0"
    )
    other = Client()
    other.force_login(outsider)
    assert other.get(f"/evaluations/{pk}/").status_code == 404
    assert other.get(f"/evaluations/{pk}/results.csv").status_code == 404


def test_evaluate_checkpoints_from_the_run_page(
    owner_client, owner, outsider, operator, api, echo_url, settings, tmp_path
):
    settings.RUNS_DIR = tmp_path / "runs"
    env_id = register_echo(api, echo_url)
    run = two_step_run_with_checkpoint(
        owner, settings, "trained",
        {"environment": env_id, "name": "echo", "prompt": "Echo '{phrase}'.", "rows": 8},
    )
    page = owner_client.get(f"/runs/{run.pk}/")
    assert f'action="/runs/{run.pk}/evaluate-checkpoints/"'.encode() in page.content
    other = Client()
    other.force_login(outsider)
    assert other.post(f"/runs/{run.pk}/evaluate-checkpoints/", {"episodes": "2"}).status_code == 404
    assert Evaluation.objects.count() == 0
    response = owner_client.post(
        f"/runs/{run.pk}/evaluate-checkpoints/", {"episodes": "2", "seed": "1"}
    )
    evaluation = Evaluation.objects.get()
    assert response["Location"] == f"/evaluations/{evaluation.pk}/"
    assert (
        evaluation.source_run_id,
        evaluation.episodes,
        [e["label"] for e in evaluation.model_specs],
    ) == (run.pk, 2, [f"run:{run.pk}@2"])
    assert (
        f'href="/evaluations/{evaluation.pk}/"'.encode()
        in owner_client.get(f"/runs/{run.pk}/").content
    )
    # An operator who may read every run, but not every evaluation, is not shown its link.
    viewer = Client()
    viewer.force_login(operator)
    seen = viewer.get(f"/runs/{run.pk}/")
    assert seen.status_code == 200 and b'id="evaluate-checkpoints"' in seen.content
    assert f'href="/evaluations/{evaluation.pk}/"'.encode() not in seen.content
    # Played (as the worker would record it): the chart and the best checkpoint appear.
    EvaluationEpisode.objects.create(
        evaluation=evaluation,
        model_index=0,
        model=f"run:{run.pk}@2",
        index=0,
        seed=1,
        reward=0.5,
        won=False,
    )
    body = owner_client.get(f"/evaluations/{evaluation.pk}/").content.decode()
    assert 'id="checkpoint-chart"' in body and "Best: step 2 (mean reward 0.5)" in body
    assert "/vendor/plotly.min.js?v=" in body
