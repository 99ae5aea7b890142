"""GET /api/runs/ as the runs table: filters, ordering, pages and metric summaries over seeded
rows, checked by exact ids; an outsider sees none of them; a bad parameter is a 400."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import EnvironmentFactory, RunFactory
from tests.fixtures.accounts import grant, token_client
from webapp.runs.models import MetricPoint, Run, RunTag

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(owner, outsider):
    """Five runs of the owner's (created in this order) and one of the outsider's."""
    env = EnvironmentFactory(owner=owner)
    rows = [
        ("alpha", Run.Status.SUCCEEDED, "catch-lr", "demo:echo", ["lr", "seed-0"], "first try", 7),
        ("beta", Run.Status.FAILED, "catch-lr", "demo:echo", ["lr"], "", 3),
        ("gamma", Run.Status.RUNNING, "", "Qwen/Qwen3-0.6B", ["seed-0"], "", 9),
        ("delta", Run.Status.SUCCEEDED, "wordle", "Qwen/Qwen3-0.6B", [], "try ALPHA again", 5),
        ("epsilon", Run.Status.QUEUED, "", "demo:echo", [], "", 0),
    ]
    runs = {}
    for name, status, group, model, tags, notes, step in rows:
        run = RunFactory(owner=owner, name=name, status=status, group=group, model=model, notes=notes, step=step)
        for tag in tags:
            RunTag.objects.create(run=run, slug=tag)
        runs[name] = run
    runs["gamma"].environments.add(env)
    runs["delta"].environments.add(env)
    runs["theirs"] = RunFactory(owner=outsider, name="alpha", group="catch-lr", model="demo:echo")
    RunTag.objects.create(run=runs["theirs"], slug="lr")
    return runs, env


def _ids(response):
    assert response.status_code == 200, response.content
    body = response.json()
    rows = body["results"] if isinstance(body, dict) else body
    return [row["id"] for row in rows]


def test_bare_list_keeps_its_shape_newest_first(api, seeded):
    runs, _ = seeded

    response = api.get("/api/runs/")

    assert isinstance(response.json(), list)
    assert _ids(response) == [runs[n].pk for n in ("epsilon", "delta", "gamma", "beta", "alpha")]
    alpha = response.json()[-1]
    assert (alpha["tags"], alpha["group"], alpha["notes"], alpha["summary"]) == (
        ["lr", "seed-0"], "catch-lr", "first try", {}
    )


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("status=succeeded", ["delta", "alpha"]),
        ("status=succeeded&status=failed", ["delta", "beta", "alpha"]),
        ("tag=lr", ["beta", "alpha"]),
        ("tag=lr&tag=seed-0", ["alpha"]),
        ("tag=seed-0", ["gamma", "alpha"]),
        ("group=catch-lr", ["beta", "alpha"]),
        ("model=Qwen/Qwen3-0.6B", ["delta", "gamma"]),
        ("search=alpha", ["delta", "alpha"]),  # a name, and notes in another case
        ("search=qwen", ["delta", "gamma"]),
        ("status=succeeded&tag=lr&group=catch-lr", ["alpha"]),
        ("tag=nothing", []),
        ("ordering=name", ["alpha", "beta", "delta", "epsilon", "gamma"]),
        ("ordering=-step", ["gamma", "alpha", "delta", "beta", "epsilon"]),
        ("ordering=status&tag=lr", ["beta", "alpha"]),
    ],
)
def test_filters_and_ordering(api, seeded, query, names):
    runs, _ = seeded

    assert _ids(api.get(f"/api/runs/?{query}")) == [runs[n].pk for n in names]
    assert _ids(api.get(f"/api/runs/?{query}&limit=50")) == [runs[n].pk for n in names]


def test_environment_filter(api, seeded):
    runs, env = seeded

    assert _ids(api.get(f"/api/runs/?environment={env.pk}")) == [runs["delta"].pk, runs["gamma"].pk]
    assert _ids(api.get(f"/api/runs/?environment={env.pk + 1000}")) == []


def test_pages_carry_count_next_and_previous(api, seeded):
    runs, _ = seeded

    first = api.get("/api/runs/?ordering=name&limit=2").json()
    second = api.get("/api/runs/?ordering=name&limit=2&offset=2").json()
    last = api.get("/api/runs/?ordering=name&limit=2&offset=4").json()

    assert [r["id"] for r in first["results"]] == [runs["alpha"].pk, runs["beta"].pk]
    assert [r["id"] for r in second["results"]] == [runs["delta"].pk, runs["epsilon"].pk]
    assert [r["id"] for r in last["results"]] == [runs["gamma"].pk]
    assert (first["count"], second["count"], last["count"]) == (5, 5, 5)
    assert first["previous"] is None and last["next"] is None
    assert first["next"] == "http://testserver/api/runs/?limit=2&offset=2&ordering=name"
    assert second["previous"] == "http://testserver/api/runs/?limit=2&ordering=name"


def test_summaries_of_chosen_keys_in_one_query(api, owner, seeded):
    runs, _ = seeded
    points = {
        "alpha": {"reward": [(1, 0.5), (2, 0.9), (3, 0.2)], "loss": [(1, 2.0), (3, 1.0)]},
        "beta": {"reward": [(1, None), (2, -1.0)]},  # TRL's NaN is stored as null
        "gamma": {"kl": [(1, 0.1)]},
    }
    seq = 0
    for name, keys in points.items():
        for key, series in keys.items():
            for step, value in series:
                seq += 1
                MetricPoint.objects.create(run=runs[name], key=key, step=step, value=value, seq=seq)
    MetricPoint.objects.create(run=runs["theirs"], key="reward", step=1, value=99.0, seq=seq + 1)

    with CaptureQueriesContext(connection) as queries:
        response = api.get("/api/runs/?ordering=name&limit=3&summary=reward&summary=loss")
    summary_queries = [q for q in queries.captured_queries if "runs_metricpoint" in q["sql"]]

    rows = {row["name"]: row["summary"] for row in response.json()["results"]}
    assert rows == {
        "alpha": {
            "reward": {"last": 0.2, "max": 0.9, "min": 0.2, "step": 3},
            "loss": {"last": 1.0, "max": 2.0, "min": 1.0, "step": 3},
        },
        "beta": {"reward": {"last": -1.0, "max": -1.0, "min": -1.0, "step": 2}},
        "delta": {},
    }
    assert len(summary_queries) == 1


def test_an_outsider_sees_none_and_a_viewer_sees_all(outsider_api, outsider, seeded, django_user_model):
    runs, _ = seeded
    viewer = token_client(grant(django_user_model.objects.create_user("viewer"), "runs.view_run"))

    assert _ids(outsider_api.get("/api/runs/?group=catch-lr&limit=10")) == [runs["theirs"].pk]
    assert _ids(outsider_api.get("/api/runs/?tag=seed-0")) == []
    assert _ids(viewer.get("/api/runs/?tag=lr&ordering=id")) == [runs[n].pk for n in ("alpha", "beta", "theirs")]


@pytest.mark.parametrize(
    ("query", "errors"),
    [
        ("status=done", {"status": ["Select a valid choice. done is not one of the available choices."]}),
        ("tag=Not%20a%20slug", {"tag": ["Select a valid choice. Not a slug is not one of the available choices."]}),
        ("environment=x", {"environment": ["Enter a number."]}),
        ("ordering=config", {"ordering": [
            "Select a valid choice. config is not one of the available choices."
        ]}),
        ("limit=0", {"limit": ["must be between 1 and 500"]}),
        ("limit=10&offset=-1", {"offset": ["must be between 0 and 1000000000"]}),
        ("summary=" + "&summary=".join(f"k{i}" for i in range(9)), {
            "summary": ["at most 8 metric keys (this asks for 9)"]
        }),
    ],
)
def test_bad_parameters_are_400(api, seeded, query, errors):
    response = api.get(f"/api/runs/?{query}")

    assert response.status_code == 400
    assert response.json() == errors
