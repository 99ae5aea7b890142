"""The rollouts API searches: reward bounds, a reward term, tools (from the per-rollout tool
summary written with the row), unscored rows, transcript text (PostgreSQL full-text through
its GIN index, SQLite a bounded scan that says so) and orderings, on both databases."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.factories import RunFactory
from webapp.runs.models import Rollout, RunEvent
from webapp.runs.services import run_claim
from webapp.runs.telemetry.record import telemetry_record
from webapp.runs.telemetry.search import RolloutSearch, run_rollout_search

pytestmark = pytest.mark.django_db

FAILED = "{'error': 'timed out'}"


def _tool(name, content="ok"):
    return {"role": "tool", "name": name, "content": content}


def _row(step, reward, advantage, rewards, text, *tools, lost=False):
    return {
        "step": step, "env": "echo", "prompt": [{"role": "user", "content": "go"}],
        "messages": [{"role": "assistant", "content": text}, *tools],
        "rewards": rewards, "reward": reward, "advantage": advantage, "lost": lost,
    }


# seq: (step, reward, advantage, terms, text, tool results)
ROWS = [
    _row(1, 1.0, 0.5, {"env_reward": 1.0, "fmt": 0.0}, "the quick brown fox", _tool("search")),
    _row(1, 0.0, -0.5, {"env_reward": 0.0, "fmt": None}, "a lazy dog", _tool("search"), _tool("search", FAILED)),
    _row(1, None, None, {"env_reward": None}, "a lost fox", lost=True),
    _row(2, 2.0, 1.5, {"env_reward": 1.0, "fmt": 1.0}, "Quick maths", _tool("calc", FAILED), _tool("search")),
    _row(2, 0.5, 0.0, {"env_reward": 0.5}, "FOX hunt \u00fcn\u00efcode", _tool("calc")),
    _row(2, -1.0, -1.5, {"env_reward": -1.0, "fmt": 0.5}, "nothing to see"),
]


@pytest.fixture
def run(owner):
    run = RunFactory(owner=owner, name="searched")
    run_claim(run_id=run.pk, lease_owner="search-test", worker_name="test")
    # Through the telemetry write path, which stores each rollout's tool summary.
    telemetry_record(run_id=run.pk, lease_owner="search-test", events=[("rollouts", ROWS)])
    return run


def _seqs(api, run, **params):
    response = api.get(f"/api/runs/{run.pk}/rollouts/", params)
    assert response.status_code == 200, response.content
    return [row["seq"] for row in response.json()["results"]]


def test_the_tool_summary_is_written_with_each_rollout(api, run):
    rows = Rollout.objects.filter(run=run).order_by("seq")
    assert [(r.seq, r.tools, r.tool_failures) for r in rows] == [
        (1, {"search": {"calls": 1, "failures": 0}}, 0),
        (2, {"search": {"calls": 2, "failures": 1}}, 1),
        (3, {}, 0),
        (4, {"calc": {"calls": 1, "failures": 1}, "search": {"calls": 1, "failures": 0}}, 1),
        (5, {"calc": {"calls": 1, "failures": 0}}, 0),
        (6, {}, 0),
    ]
    listed = api.get(f"/api/runs/{run.pk}/rollouts/", {"after_seq": 1, "limit": 1}).json()
    assert listed["results"][0]["tools"] == {"search": {"calls": 2, "failures": 1}}
    assert listed["search"] is None


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, [1, 2, 3, 4, 5, 6]),
        ({"min_reward": "0.5"}, [1, 4, 5]),
        ({"max_reward": "0"}, [2, 6]),
        ({"min_reward": "0", "max_reward": "1"}, [1, 2, 5]),
        ({"term": "fmt"}, [1, 4, 6]),
        ({"term": "fmt", "term_min": "0.5"}, [4, 6]),
        ({"term": "env_reward", "term_min": "0.75"}, [1, 4]),
        ({"term": "absent"}, []),
        ({"tool": "search"}, [1, 2, 4]),
        ({"tool": "search", "tool_failed": "true"}, [2]),
        ({"tool": "search", "tool_failed": "false"}, [1, 4]),
        ({"tool": "calc", "tool_failed": "true"}, [4]),
        ({"tool": "nope"}, []),
        ({"tool_failed": "true"}, [2, 4]),
        ({"tool_failed": "false"}, [1, 3, 5, 6]),
        ({"unscored": "true"}, [3]),
        ({"unscored": "false"}, [1, 2, 4, 5, 6]),
        ({"q": "fox"}, [1, 3, 5]),
        ({"q": "QUICK"}, [1, 4]),
        ({"q": "\u00fcn\u00efcode"}, [5]),
        ({"q": "zebra"}, []),
        ({"ordering": "-seq"}, [6, 5, 4, 3, 2, 1]),
        ({"ordering": "-reward"}, [4, 1, 5, 2, 6, 3]),
        ({"ordering": "reward"}, [6, 2, 5, 1, 4, 3]),
        ({"ordering": "-advantage"}, [4, 1, 5, 2, 6, 3]),
        ({"ordering": "advantage"}, [6, 2, 5, 1, 4, 3]),
        # Combinations, with the filters that were there before (step, before_seq).
        ({"step": "2", "tool": "calc", "ordering": "-reward"}, [4, 5]),
        ({"min_reward": "0", "tool_failed": "false", "ordering": "-advantage"}, [1, 5]),
        ({"q": "fox", "unscored": "false"}, [1, 5]),
        ({"tool": "search", "before_seq": "4"}, [2, 1]),
        ({"term": "fmt", "step": "1", "ordering": "reward"}, [1]),
    ],
)
def test_each_filter_and_ordering_returns_exactly_these_rollouts(api, run, params, expected):
    assert _seqs(api, run, **params) == expected


def test_by_reward_the_pages_go_by_offset_and_by_seq_by_keyset(api, run):
    url = f"/api/runs/{run.pk}/rollouts/"
    first = api.get(url, {"ordering": "-reward", "limit": 2}).json()
    assert [r["seq"] for r in first["results"]] == [4, 1]
    assert first["next"].endswith(f"{url}?ordering=-reward&limit=2&offset=2")
    second = api.get(first["next"]).json()
    assert [r["seq"] for r in second["results"]] == [5, 2]
    third = api.get(second["next"]).json()
    assert ([r["seq"] for r in third["results"]], third["next"]) == ([6, 3], None)

    keyset = api.get(url, {"tool": "search", "limit": 2}).json()
    assert [r["seq"] for r in keyset["results"]] == [1, 2]
    assert keyset["next"].endswith(f"{url}?tool=search&limit=2&after_seq=2")
    rest = api.get(keyset["next"]).json()
    assert ([r["seq"] for r in rest["results"]], rest["next"]) == ([4], None)
    newest = api.get(url, {"ordering": "-seq", "unscored": "false", "limit": 3}).json()
    assert [r["seq"] for r in newest["results"]] == [6, 5, 4]
    assert newest["next"].endswith(f"{url}?ordering=-seq&unscored=false&limit=3&before_seq=4")
    assert [r["seq"] for r in api.get(newest["next"]).json()["results"]] == [2, 1]


def test_a_rollout_stored_before_tool_summaries_counts_as_using_no_tool(api, run):
    Rollout.objects.create(
        run=run, seq=7, step=2, env="echo", messages=[_tool("search", FAILED)], reward=0.0, advantage=0.0
    )
    assert _seqs(api, run, tool="search") == [1, 2, 4]
    assert _seqs(api, run, tool_failed="true") == [2, 4]
    assert _seqs(api, run, tool_failed="false") == [1, 3, 5, 6, 7]


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"min_reward": "much"}, "min_reward"),
        ({"max_reward": "nan"}, "max_reward"),
        ({"min_reward": "2", "max_reward": "1"}, "max_reward"),
        ({"term_min": "1"}, "term_min"),
        ({"term": "fmt", "term_min": "inf"}, "term_min"),
        ({"tool": "two words"}, "tool"),
        ({"tool": "x" * 65}, "tool"),
        ({"tool_failed": "maybe"}, "tool_failed"),
        ({"unscored": "2"}, "unscored"),
        ({"ordering": "name"}, "ordering"),
        ({"ordering": "-reward", "offset": "-1"}, "offset"),
        ({"offset": "2"}, "offset"),
        ({"q": "x" * 201}, "q"),
        ({"term": "t" * 201}, "term"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it_that_changes_nothing(api, run, params, name):
    before = list(Rollout.objects.filter(run=run).order_by("seq").values())
    events = RunEvent.objects.count()
    response = api.get(f"/api/runs/{run.pk}/rollouts/", params)
    assert response.status_code == 400
    assert list(response.json()) == [name]
    assert list(Rollout.objects.filter(run=run).order_by("seq").values()) == before
    assert RunEvent.objects.count() == events


def test_the_owner_and_a_user_allowed_to_view_runs_search_an_outsider_and_plain_staff_do_not(
    api, operator_api, outsider_api, staff_api, run
):
    params = {"tool": "search", "tool_failed": "true"}
    assert _seqs(api, run, **params) == [2]
    # The lab's "teammate": a user granted runs.view_run sees every run.
    assert _seqs(operator_api, run, **params) == [2]
    for other in (outsider_api, staff_api):
        response = other.get(f"/api/runs/{run.pk}/rollouts/", params)
        assert response.status_code == 404


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the full-text index is PostgreSQL's")
def test_on_postgresql_q_is_full_text_through_the_gin_index(api, run):
    body = api.get(f"/api/runs/{run.pk}/rollouts/", {"q": "quick fox"}).json()
    # Words, not a substring: both words in one transcript.
    assert ([r["seq"] for r in body["results"]], body["search"]) == ([1], {"mode": "fulltext"})
    # A run of 3,000 more rollouts where the word is rare, its statistics fresh: the planner
    # finds the few rows through the text index rather than reading the run's rows.
    Rollout.objects.bulk_create(
        [
            Rollout(run=run, seq=seq, step=3, env="echo", messages=[{"role": "assistant", "content": f"filler {seq}"}])
            for seq in range(7, 3007)
        ],
        batch_size=1000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_rollout")
    rows, found = run_rollout_search(run=run, search=RolloutSearch(q="fox"))
    plan = rows.explain()
    assert "rollout_messages_fts" in plan
    assert ([r.seq for r in rows], found) == ([1, 3, 5], {"mode": "fulltext"})


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the bounded scan is SQLite's")
def test_on_sqlite_q_scans_the_newest_rows_and_says_so(api, run, monkeypatch):
    body = api.get(f"/api/runs/{run.pk}/rollouts/", {"q": "fox"}).json()
    assert ([r["seq"] for r in body["results"]], body["search"]) == (
        [1, 3, 5], {"mode": "scan", "scanned": 6, "limit": 5000},
    )
    # A smaller bound (5,000 rows are not seeded here): only the newest 3 rows are looked at.
    monkeypatch.setattr("webapp.runs.telemetry.search.SEARCH_SCAN_LIMIT", 3)
    body = api.get(f"/api/runs/{run.pk}/rollouts/", {"q": "fox"}).json()
    assert ([r["seq"] for r in body["results"]], body["search"]) == ([5], {"mode": "scan", "scanned": 3, "limit": 3})
