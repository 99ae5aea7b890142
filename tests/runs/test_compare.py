"""Comparing runs: a metric of 2-6 runs on shared axes, and their config differences."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.factories import RunFactory
from tests.fixtures.accounts import grant, token_client
from webapp.evaluations.arena.compare import MISSING, config_diff
from webapp.runs.models import MetricPoint, Run, RunTag

pytestmark = pytest.mark.django_db

BASE = {"name": "a", "model": "demo:echo", "grpo": {"learning_rate": 1e-5, "max_steps": 3}, "environments": [{"environment": 1}]}


def _run(owner, name, config, rewards):
    run = RunFactory(owner=owner, name=name, config=config)
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
    old = RunFactory(owner=owner, name="old", config=before)
    new = RunFactory(owner=owner, name="new", config=now)
    assert config_diff([old, new]) == []
    dapo = RunFactory(
        owner=owner,
        name="dapo",
        config=config_to_store(parse_run_config({**config, "grpo": {**BASE["grpo"], "epsilon_high": 0.28}})),
    )
    assert config_diff([old, dapo]) == [{"key": "grpo.epsilon_high", "values": [MISSING, 0.28]}]


# --- grouped compare: GET /api/runs/compare/?group_by=... ----------------------------------


def _seeded(owner, name, lr, seed, rewards, *, group="", tags=()):
    config = {**BASE, "name": name, "grpo": {"learning_rate": lr, "seed": seed, "max_steps": 3}}
    run = _run(owner, name, config, rewards)
    Run.objects.filter(pk=run.pk).update(group=group)
    for slug in tags:
        RunTag.objects.create(run=run, slug=slug)
    return run


@pytest.fixture
def seeds(owner):
    """2 learning rates x 3 seeds, the last seed of each stopping a step early."""
    low = [_seeded(owner, f"low-{s}", 1e-5, s, [0.1 * (s + 1), 0.2 * (s + 1), 0.3][: 3 - (s == 2)],
                   group="low", tags=("sweep", "low")) for s in range(3)]
    high = [_seeded(owner, f"high-{s}", 3e-5, s, [1.0 + s, 2.0 + s, 3.0][: 3 - (s == 2)],
                    group="high", tags=("sweep",)) for s in range(3)]
    return low, high


def _query(runs, extra):
    return "&".join(f"run={run.pk}" for run in runs) + extra


def test_grouped_by_a_config_path_gives_each_group_its_mean_and_band_at_every_step(api, seeds):
    low, high = seeds
    response = api.get(f"/api/runs/compare/?{_query(low + high, '&key=reward&key=only/low-0&group_by=config.grpo.learning_rate&band=std')}")

    assert response.status_code == 200
    data = response.json()
    assert (data["group_by"], data["band"]) == ("config.grpo.learning_rate", "std")
    assert data["groups"] == [
        {"group": "1e-05", "runs": [run.pk for run in low]},
        {"group": "3e-05", "runs": [run.pk for run in high]},
    ]
    assert [chart["key"] for chart in data["charts"]] == ["reward", "only/low-0"]
    reward = data["charts"][0]["groups"]
    assert [(g["group"], g["steps"], g["count"]) for g in reward] == [
        ("1e-05", [1, 2, 3], [3, 3, 2]), ("3e-05", [1, 2, 3], [3, 3, 2]),
    ]
    assert reward[0]["mean"] == pytest.approx([0.2, 0.4, 0.3])
    assert reward[0]["min"] == pytest.approx([0.1, 0.2, 0.3]) and reward[0]["max"] == pytest.approx([0.3, 0.6, 0.3])
    assert reward[1]["mean"] == pytest.approx([2.0, 3.0, 3.0])
    assert reward[1]["std"] == pytest.approx([np.std([1.0, 2.0, 3.0]), np.std([2.0, 3.0, 4.0]), 0.0])
    figure = data["charts"][0]["figure"]
    assert [t["meta"]["role"] for t in figure["data"]] == ["band-lower", "band-upper", "mean"] * 2
    assert figure["data"][4]["y"] == pytest.approx([2.0 + np.std([1.0, 2.0, 3.0]), 3.0 + np.std([2.0, 3.0, 4.0]), 3.0])
    # Only low-0 logged the second key: its group has one run's points, the other none.
    assert [(g["group"], g["steps"], g["mean"]) for g in data["charts"][1]["groups"]] == [
        ("1e-05", [1], [1.0]), ("3e-05", [], []),
    ]
    # The first chart's series, as before charts were many.
    assert data["key"] == "reward" and data["series"][str(low[0].pk)] == [[1, 0.1], [2, 0.2], [3, 0.3]]


def test_grouped_by_the_runs_group_and_by_tag(api, seeds):
    low, high = seeds
    by_group = api.get(f"/api/runs/compare/?{_query(low + high[:1], '&group_by=group')}").json()
    by_tag = api.get(f"/api/runs/compare/?{_query(low[:1] + high[:2], '&group_by=tag')}").json()

    assert by_group["groups"] == [{"group": "low", "runs": [r.pk for r in low]}, {"group": "high", "runs": [high[0].pk]}]
    # A run with two tags is in both groups.
    assert by_tag["groups"] == [{"group": "low", "runs": [low[0].pk]}, {"group": "sweep", "runs": [low[0].pk, high[0].pk, high[1].pk]}]
    assert by_tag["charts"][0]["groups"][1]["mean"] == pytest.approx([(0.1 + 1.0 + 2.0) / 3, (0.2 + 2.0 + 3.0) / 3, 2.1])


@pytest.mark.parametrize(
    ("extra", "errors"),
    [
        ("&group_by=grpo.seed", {"group_by": [
            "'grpo.seed' is not a grouping: use group, tag or config.<dotted path> (e.g. config.grpo.learning_rate)"]}),
        ("&group_by=config.grpo..seed", {"group_by": [
            "'config.grpo..seed' is not a grouping: use group, tag or config.<dotted path> (e.g. config.grpo.learning_rate)"]}),
        ("&group_by=config.grpo.lr", {"group_by": ["no chosen run's config has 'grpo.lr'"]}),
        ("&group_by=group&band=iqr", {"band": ["band is one of minmax, std, not 'iqr'"]}),
        ("&key=reward&key=nope", {"key": ["none of these runs logged 'nope'"]}),
    ],
)
def test_bad_groupings_say_what_to_fix(api, seeds, extra, errors):
    low, high = seeds
    response = api.get(f"/api/runs/compare/?{_query(low + high, extra)}")
    assert (response.status_code, response.json()) == (400, errors)


def test_grouping_raises_the_cap_to_24_runs_and_no_further(api, owner):
    runs = [_seeded(owner, f"r{i}", 1e-5, i, [0.5]) for i in range(25)]

    ungrouped = api.get(f"/api/runs/compare/?{_query(runs[:7], '')}")
    grouped = api.get(f"/api/runs/compare/?{_query(runs[:24], '&group_by=config.grpo.seed')}")
    too_many = api.get(f"/api/runs/compare/?{_query(runs, '&group_by=config.grpo.seed')}")

    assert (ungrouped.status_code, ungrouped.json()) == (400, {"run": ["pick 2 to 6 different runs to compare, not 7"]})
    assert grouped.status_code == 200 and len(grouped.json()["groups"]) == 24
    assert (too_many.status_code, too_many.json()) == (400, {"run": ["pick 2 to 24 different runs to compare, not 25"]})


def test_grouped_compare_is_the_owners_a_viewer_sees_it_an_outsider_does_not(api, outsider_api, django_user_model, seeds):
    low, high = seeds
    query = _query(low[:1] + high[:1], "&group_by=config.grpo.learning_rate")
    viewer = token_client(grant(django_user_model.objects.create_user("viewer"), "runs.view_run"))

    owner_view = api.get(f"/api/runs/compare/?{query}")
    viewer_view = viewer.get(f"/api/runs/compare/?{query}")
    outsider_view = outsider_api.get(f"/api/runs/compare/?{query}")

    assert owner_view.status_code == 200 and viewer_view.json() == owner_view.json()
    assert (outsider_view.status_code, outsider_view.json()) == (
        400, {"run": [f"no run with id {low[0].pk}, {high[0].pk}"]}
    )


def test_the_page_draws_one_chart_per_key_with_a_band_per_group(client, owner, seeds):
    low, high = seeds
    client.force_login(owner)
    response = client.get(f"/runs/compare/?{_query(low + high, '&key=reward&key=only/low-1&group_by=group&band=std')}")

    page = response.content.decode()
    assert response.status_code == 200
    first = json.loads(page.split('id="compare-figure" type="application/json">')[1].split("</script>")[0])
    second = json.loads(page.split('id="compare-figure-1" type="application/json">')[1].split("</script>")[0])
    assert [(t["meta"]["group"], t["meta"]["role"]) for t in first["data"] if t["meta"]["role"] == "mean"] == [
        ("low", "mean"), ("high", "mean"),
    ]
    assert second["layout"]["yaxis"]["title"]["text"] == "only/low-1"
    assert 'data-group="low"' in page and 'value="std" selected' in page
    bad = client.get(f"/runs/compare/?{_query(low + high, '&group_by=config.nope')}")
    assert bad.status_code == 400 and "no chosen run&#x27;s config has &#x27;nope&#x27;" in bad.content.decode()
