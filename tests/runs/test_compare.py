"""Comparing runs: a metric of 2-6 runs on shared axes, and their config differences."""

from __future__ import annotations

import json

import pytest

from webapp.evaluations.arena.compare import MISSING, config_diff
from webapp.runs.models import MetricPoint, Run

pytestmark = pytest.mark.django_db

BASE = {"name": "a", "model": "demo:echo", "grpo": {"learning_rate": 1e-5, "max_steps": 3}, "environments": [{"environment": 1}]}


def _run(owner, name, config, rewards):
    run = Run.objects.create(owner=owner, name=name, config=config, model="demo:echo", max_steps=3)
    MetricPoint.objects.bulk_create(
        [MetricPoint(run=run, step=step, key="reward", value=value, seq=step) for step, value in enumerate(rewards, 1)]
        + [MetricPoint(run=run, step=1, key=f"only/{name}", value=1.0, seq=10)]
    )
    return run


@pytest.fixture
def runs(owner):
    first = _run(owner, "a", BASE, [0.1, 0.2, 0.4])
    second = _run(owner, "<b>b</b>", {**BASE, "name": "b", "grpo": {"learning_rate": 3e-5, "max_steps": 3},
                                       "device": "cpu"}, [0.3, 0.3])
    return first, second


def test_the_api_overlays_one_metric_and_lists_what_differs(api, runs):
    first, second = runs
    data = api.get(f"/api/runs/compare/?run={first.pk}&run={second.pk}&key=reward").json()
    assert data["series"] == {str(first.pk): [[1, 0.1], [2, 0.2], [3, 0.4]], str(second.pk): [[1, 0.3], [2, 0.3]]}
    assert data["keys"] == ["only/<b>b</b>", "only/a", "reward"]
    assert data["config_diff"] == [
        {"key": "device", "values": ["—", "cpu"]},
        {"key": "grpo.learning_rate", "values": [1e-5, 3e-5]},
        {"key": "name", "values": ["a", "b"]},
    ]


@pytest.mark.parametrize(
    ("query", "errors"),
    [
        ("run=1", {"run": ["pick 2 to 6 different runs to compare, not 1"]}),
        ("run=x&run=2", {"run": ["run ids are whole numbers"]}),
        ("run=1&run=2&run=3&run=4&run=5&run=6&run=7", {"run": ["pick 2 to 6 different runs to compare, not 7"]}),
    ],
)
def test_bad_selections_say_what_to_fix(api, query, errors):
    response = api.get(f"/api/runs/compare/?{query}")
    assert (response.status_code, response.json()) == (400, errors)


def test_another_users_run_is_unknown(api, outsider, runs):
    theirs = _run(outsider, "theirs", BASE, [0.5])
    response = api.get(f"/api/runs/compare/?run={runs[0].pk}&run={theirs.pk}")
    assert (response.status_code, response.json()) == (400, {"run": [f"no run with id {theirs.pk}"]})
    missing_key = api.get(f"/api/runs/compare/?run={runs[0].pk}&run={runs[1].pk}&key=nope")
    assert missing_key.json() == {"key": ["none of these runs logged 'nope'"]}


def test_lists_compare_whole_and_nested_keys_flatten():
    one = Run(pk=1, config={"rewards": [{"name": "a"}], "alerts": {"stop_on": ["nonfinite"]}})
    two = Run(pk=2, config={"rewards": [{"name": "a"}], "alerts": {"stop_on": []}})
    assert config_diff([one, two]) == [{"key": "alerts.stop_on", "values": [["nonfinite"], []]}]


def test_the_page_shows_the_figure_and_the_diff_with_names_as_text(client, owner, runs):
    first, second = runs
    client.force_login(owner)
    page = client.get(f"/runs/compare/?run={first.pk}&run={second.pk}").content.decode()
    figure = json.loads(page.split('id="compare-figure" type="application/json">')[1].split("</script>")[0])
    assert [trace["name"] for trace in figure["data"]] == [f"#{first.pk} a", f"#{second.pk} \u2039b\u203ab\u2039/b\u203a"]
    assert "<b>b</b>" not in page and "&lt;b&gt;b&lt;/b&gt;" in page
    assert 'data-key="grpo.learning_rate"' in page
    home = client.get("/").content.decode()
    assert f'<input type="checkbox" name="run" value="{first.pk}"' in home


def test_the_page_explains_a_bad_selection(client, owner):
    client.force_login(owner)
    response = client.get("/runs/compare/?run=1")
    assert response.status_code == 400
    assert "pick 2 to 6 different runs to compare, not 1" in response.content.decode()


def test_a_config_stored_before_the_trl_fields_and_sft_warmup_compares_equal_to_one_stored_now(owner):
    from webapp.runs.config import config_to_store, parse_run_config

    config = {**BASE, "environments": [{"environment": 1, "name": "env"}]}
    now = config_to_store(parse_run_config(config))
    assert "loss_type" not in now["grpo"] and now["sft_warmup"] is None
    # Before: the SFT phase under `warmup`, and no TRL field in `grpo`.
    before = {("warmup" if key == "sft_warmup" else key): value for key, value in now.items()}
    old = Run.objects.create(owner=owner, name="old", config=before, model="demo:echo", max_steps=3)
    new = Run.objects.create(owner=owner, name="new", config=now, model="demo:echo", max_steps=3)
    assert config_diff([old, new]) == []
    dapo = Run.objects.create(
        owner=owner, name="dapo", model="demo:echo", max_steps=3,
        config=config_to_store(parse_run_config({**config, "grpo": {**BASE["grpo"], "epsilon_high": 0.28}})),
    )
    assert config_diff([old, dapo]) == [{"key": "grpo.epsilon_high", "values": [MISSING, 0.28]}]
