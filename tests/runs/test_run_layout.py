"""The per-user chart layout of run pages (webapp.runs.telemetry.layout), its API
(/api/account/run-layout/), the metric keys API and what the run page embeds for the
metric picker."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import RunFactory
from webapp.accounts.models import RunChartLayout
from webapp.runs.models import MetricPoint, Run
from webapp.runs.telemetry.layout import (
    MAX_LAYOUT_BYTES,
    MAX_METRIC_CHARTS,
    RunLayoutRejected,
    run_layout_clean,
    run_layout_for,
)
from webapp.runs.telemetry.metric_keys import WALL_TIME_KEY

pytestmark = pytest.mark.django_db

LAYOUT_URL = "/api/account/run-layout/"
FULL = {"smoothing": 0.0, "log_y": False, "x": "step"}


def _rejected(data) -> dict[str, list[str]]:
    with pytest.raises(RunLayoutRejected) as caught:
        run_layout_clean(data)
    return caught.value.errors


# --- validation ------------------------------------------------------------------------


def test_a_layout_is_cleaned_with_every_setting_filled_in() -> None:
    cleaned = run_layout_clean(
        {
            "metrics": ["grad_norm", "rewards/env_reward/std"],
            "settings": {
                "reward": {"smoothing": 0.6},
                "metric:grad_norm": {"smoothing": 0, "log_y": True, "x": "wall_time"},
            },
        }
    )

    assert cleaned == {
        "metrics": ["grad_norm", "rewards/env_reward/std"],
        "settings": {
            "reward": {"smoothing": 0.6, "log_y": False, "x": "step"},
            "metric:grad_norm": {"smoothing": 0.0, "log_y": True, "x": "wall_time"},
        },
    }
    assert run_layout_clean({}) == {"metrics": [], "settings": {}}


def test_each_fault_is_named_with_what_to_fix() -> None:
    errors = _rejected(
        {
            "metrics": ["grad_norm", "grad_norm", "_wall_time", "", 7, "a\nb", "k" * 121],
            "settings": {
                "reward": {"smoothing": 1.0, "log_y": "yes", "x": "time", "colour": "red"},
                "loss": {"smoothing": True},
                "metric:entropy": {},
                "nonsense": {},
                "tool-calls": [],
            },
            "zoom": 3,
        }
    )

    assert errors == {
        "layout": ["unknown field(s) zoom; allowed: metrics, settings"],
        "metrics.1": ["'grad_norm' is listed twice"],
        "metrics.2": ["keys starting with '_' are the lab's own bookkeeping, not charts"],
        "metrics.3": ["must be a non-empty string (a metric key the run logged)"],
        "metrics.4": ["must be a non-empty string (a metric key the run logged)"],
        "metrics.5": ["must not contain control characters"],
        "metrics.6": ["must be at most 120 characters"],
        "settings.reward": ["unknown field(s) colour; allowed: smoothing, log_y, x"],
        "settings.reward.smoothing": ["must be a number from 0 to 0.99"],
        "settings.reward.log_y": ["must be true or false"],
        "settings.reward.x": ["must be one of step, wall_time"],
        "settings.loss.smoothing": ["must be a number from 0 to 0.99"],
        "settings.metric:entropy": [
            "no such chart: use one of reward, tool-calls, tool-failures, loss, time, completion-length, "
            "or 'metric:<key>' for a key listed in metrics"
        ],
        "settings.nonsense": [
            "no such chart: use one of reward, tool-calls, tool-failures, loss, time, completion-length, "
            "or 'metric:<key>' for a key listed in metrics"
        ],
        "settings.tool-calls": ["must be an object with smoothing, log_y and x"],
    }


@pytest.mark.parametrize(
    ("data", "errors"),
    [
        ([], {"layout": ["must be an object with 'metrics' and 'settings'"]}),
        ({"metrics": "grad_norm"}, {"metrics": ["must be a list of metric keys"]}),
        ({"settings": []}, {"settings": ["must be an object: chart -> {smoothing, log_y, x}"]}),
        (
            {"metrics": [f"k{i}" for i in range(MAX_METRIC_CHARTS + 1)]},
            {"metrics": [f"at most {MAX_METRIC_CHARTS} added charts; remove some"]},
        ),
        (
            {"settings": {"reward": {"smoothing": float("nan")}}},
            {"layout": ["must be plain JSON with finite numbers"]},
        ),
    ],
)
def test_wrong_shapes_are_refused(data, errors) -> None:
    assert _rejected(data) == errors


def test_a_layout_over_the_size_bound_is_refused_before_anything_else() -> None:
    errors = _rejected({"metrics": ["x" * MAX_LAYOUT_BYTES]})

    assert list(errors) == ["layout"]
    assert errors["layout"][0].endswith(f"bytes; at most {MAX_LAYOUT_BYTES}")


def test_reading_drops_settings_of_charts_that_no_longer_exist(owner) -> None:
    RunChartLayout.objects.create(
        user=owner,
        layout={
            "metrics": ["grad_norm"],
            "settings": {"retired-chart": FULL, "metric:grad_norm": {**FULL, "log_y": True}},
        },
    )

    assert run_layout_for(user=owner) == {
        "metrics": ["grad_norm"],
        "settings": {"metric:grad_norm": {**FULL, "log_y": True}},
    }


# --- the layout API ----------------------------------------------------------------------


def test_each_user_reads_and_replaces_only_their_own_layout(
    api, outsider_api, owner, outsider
) -> None:
    layout = {"metrics": ["grad_norm"], "settings": {"metric:grad_norm": {"smoothing": 0.8}}}

    put = api.put(LAYOUT_URL, layout, format="json")
    mine = api.get(LAYOUT_URL)
    theirs = outsider_api.get(LAYOUT_URL)

    expected = {
        "metrics": ["grad_norm"],
        "settings": {"metric:grad_norm": {**FULL, "smoothing": 0.8}},
    }
    assert (put.status_code, put.json()) == (200, expected)
    assert (mine.status_code, mine.json()) == (200, expected)
    assert (theirs.status_code, theirs.json()) == (200, {"metrics": [], "settings": {}})
    assert RunChartLayout.objects.get(user=owner).layout == expected
    assert not RunChartLayout.objects.filter(user=outsider).exists()

    # A PUT replaces the layout whole.
    again = api.put(LAYOUT_URL, {"settings": {"loss": {"x": "wall_time"}}}, format="json")
    assert again.json() == {"metrics": [], "settings": {"loss": {**FULL, "x": "wall_time"}}}
    assert RunChartLayout.objects.filter(user=owner).count() == 1


def test_a_rejected_layout_changes_nothing(api, owner) -> None:
    stored = {"metrics": ["grad_norm"], "settings": {}}
    RunChartLayout.objects.create(user=owner, layout=stored)

    response = api.put(LAYOUT_URL, {"metrics": ["_wall_time"]}, format="json")
    form = api.put(LAYOUT_URL, {"metrics": "grad_norm"})  # a form body, not JSON

    assert response.status_code == 400
    assert response.json() == {
        "metrics.0": ["keys starting with '_' are the lab's own bookkeeping, not charts"]
    }
    assert form.status_code == 415
    assert RunChartLayout.objects.get(user=owner).layout == stored


def test_the_layout_api_needs_a_login(client: Client) -> None:
    get = client.get(LAYOUT_URL)
    put = client.put(LAYOUT_URL, "{}", content_type="application/json")

    assert (get.status_code, put.status_code) == (401, 401)
    assert RunChartLayout.objects.count() == 0


def test_from_a_session_the_put_needs_the_csrf_token(owner) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    body = json.dumps({"metrics": ["grad_norm"]})

    refused = browser.put(LAYOUT_URL, body, content_type="application/json")
    browser.get(reverse("home"))  # a page with a form sets the CSRF cookie
    page_token = browser.cookies["csrftoken"].value
    accepted = browser.put(
        LAYOUT_URL, body, content_type="application/json", HTTP_X_CSRFTOKEN=page_token
    )

    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    assert accepted.status_code == 200
    assert RunChartLayout.objects.get(user=owner).layout == {
        "metrics": ["grad_norm"],
        "settings": {},
    }


# --- keys of a run and the page ------------------------------------------------------------


@pytest.fixture
def logged_run(owner) -> Run:
    run = RunFactory(owner=owner, name="r", max_steps=10)
    rows = []
    for step in (1, 2, 3):
        for key, value in (
            ("reward", step / 10),
            ("grad_norm", float(step)),
            ("rewards/env_reward/std", 0.1),
            (WALL_TIME_KEY, 1_700_000_000.0 + step),
        ):
            rows.append(MetricPoint(run=run, key=key, step=step, value=value, seq=step))
    MetricPoint.objects.bulk_create(rows)
    return run


def test_the_keys_api_lists_chartable_keys_to_those_who_see_the_run(
    api, outsider_api, operator_api, logged_run
) -> None:
    url = reverse("api-run-metric-keys", args=[logged_run.pk])

    owner_answer = api.get(url)
    operator_answer = operator_api.get(url)
    outsider_answer = outsider_api.get(url)

    keys = ["grad_norm", "reward", "rewards/env_reward/std"]
    assert (owner_answer.status_code, owner_answer.json()) == (200, {"keys": keys})
    assert (operator_answer.status_code, operator_answer.json()) == (200, {"keys": keys})
    assert outsider_answer.status_code == 404


def test_the_run_page_embeds_keys_wall_times_and_the_viewers_layout(owner, logged_run) -> None:
    RunChartLayout.objects.create(
        user=owner,
        layout={
            "metrics": ["grad_norm", "never_logged"],
            "settings": {"reward": {**FULL, "smoothing": 0.5}},
        },
    )
    browser = Client()
    browser.force_login(owner)

    content = browser.get(reverse("run-detail", args=[logged_run.pk])).content.decode()

    page = json.loads(
        re.search(
            r'<script id="run-chart-page" type="application/json">(.*?)</script>', content, re.S
        ).group(1)
    )
    assert page["keys"] == ["grad_norm", "reward", "rewards/env_reward/std"]
    assert page["wall_time"] == [[1, 1_700_000_001.0], [2, 1_700_000_002.0], [3, 1_700_000_003.0]]
    assert page["layout"] == {
        "metrics": ["grad_norm", "never_logged"],
        "settings": {"reward": {**FULL, "smoothing": 0.5}},
    }
    assert [c["id"] for c in page["metric_charts"]] == ["metric:grad_norm", "metric:never_logged"]
    assert page["metric_charts"][0]["figure"]["data"][0]["x"] == [1, 2, 3]
    assert page["metric_charts"][0]["figure"]["data"][0]["y"] == [1.0, 2.0, 3.0]
    assert page["metric_charts"][1]["figure"]["data"][0]["x"] == []
    assert page["api_layout"] == LAYOUT_URL
    assert page["wall_time_key"] == WALL_TIME_KEY
    assert page["csrf_token"]
    assert '<details class="metric-picker" id="metric-picker">' in content
