"""selectors.run_metric_series: long series are bucketed in SQL keeping each bucket's lowest
and highest point, so a one-step spike survives; short series come back as they are."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from webapp.runs.models import MetricPoint, Run
from webapp.runs.selectors import run_metric_series

pytestmark = pytest.mark.django_db

STEPS = 100_000
SPIKE_STEP, SPIKE = 61_234, 50.0
DIP_STEP, DIP = 7, -50.0


def noise(step: int) -> float:
    """Distinct values in [0, 1) for steps below 100 003: no ties to break."""
    return (step * 7919) % 100_003 / 100_003


def long_series(step: int) -> float:
    return {SPIKE_STEP: SPIKE, DIP_STEP: DIP}.get(step, noise(step))


def add_points(run: Run, key: str, points: list[tuple[int, float | None]]) -> None:
    MetricPoint.objects.bulk_create(
        [MetricPoint(run=run, key=key, step=s, value=v, seq=s) for s, v in points],
        batch_size=5000,
    )


def expected_buckets(points: list[tuple[int, float]], max_points: int) -> list[list[float]]:
    """The rule, written plainly: (max_points - 2) // 2 equal step ranges from the first step
    to the last, each giving its lowest and highest point (the earliest on a tie), plus the
    first and the last point."""
    buckets = (max_points - 2) // 2
    first, last = points[0][0], points[-1][0]
    span = last - first + 1
    picked = {points[0], points[-1]}
    for i in range(buckets):
        lo, hi = first + i * span // buckets, first + (i + 1) * span // buckets
        inside = [p for p in points if lo <= p[0] < hi]
        if inside:
            picked.add(min(inside, key=lambda p: (p[1], p[0])))
            picked.add(min(inside, key=lambda p: (-p[1], p[0])))
    return [[s, v] for s, v in sorted(picked)]


@pytest.fixture
def run(owner):
    return Run.objects.create(owner=owner, name="long", config={}, model="demo:echo", max_steps=STEPS)


def test_a_one_step_spike_on_100k_steps_survives_500_points(run, api):
    points = [(s, long_series(s)) for s in range(1, STEPS + 1)]
    add_points(run, "loss", points)

    with CaptureQueriesContext(connection) as queries:
        series = run_metric_series(run=run, keys=["loss"], max_points=500)

    loss = series["loss"]
    assert list(series) == ["loss"]
    assert loss == expected_buckets(points, 500)
    assert len(loss) == 500
    assert loss[0] == [1, noise(1)]
    assert loss[-1] == [STEPS, noise(STEPS)]
    assert [SPIKE_STEP, SPIKE] in loss
    assert [DIP_STEP, DIP] in loss
    assert [s for s, _ in loss] == sorted({s for s, _ in loss})
    # A count capped at max_points + 1, the first and last step, the buckets.
    assert len(queries) == 3
    response = api.get(f"/api/runs/{run.pk}/metrics/?key=loss&max_points=500")
    assert response.status_code == 200
    assert response.json() == {"series": {"loss": loss}}


def test_a_series_that_fits_comes_back_unchanged_without_its_null_values(run):
    add_points(run, "reward", [(1, 0.5), (2, None), (3, 0.25), (5, 0.75), (9, 1.0)])

    assert run_metric_series(run=run, keys=["reward"], max_points=4) == {
        "reward": [[1, 0.5], [3, 0.25], [5, 0.75], [9, 1.0]]
    }
    assert run_metric_series(run=run, keys=["reward"], max_points=500) == {
        "reward": [[1, 0.5], [3, 0.25], [5, 0.75], [9, 1.0]]
    }


def test_several_keys_each_bucketed_and_keys_without_values_left_out(run):
    """Keys sharing steps but not ranges: each is bucketed over its own first and last step."""
    kl = [(s, noise(s)) for s in range(1, 2_001)]
    evals = [(s, noise(s) + 1) for s in range(100, 2_001, 10)]  # 191 points, from step 100
    add_points(run, "kl", kl)
    add_points(run, "eval/reward", evals)
    add_points(run, "lr", [(1, 0.001), (2, 0.002)])
    add_points(run, "empty", [(1, None), (2, None)])

    every = run_metric_series(run=run, keys=None, max_points=100)
    chosen = run_metric_series(run=run, keys=["kl", "lr", "unknown", "kl"], max_points=100)

    assert list(every) == ["eval/reward", "kl", "lr"]
    assert every["kl"] == expected_buckets(kl, 100)
    assert every["eval/reward"] == expected_buckets(evals, 100)
    assert every["eval/reward"][0] == [100, noise(100) + 1]
    assert every["eval/reward"][-1] == [2_000, noise(2_000) + 1]
    assert every["lr"] == [[1, 0.001], [2, 0.002]]
    assert chosen == {"kl": every["kl"], "lr": [[1, 0.001], [2, 0.002]]}
    assert all(len(points) <= 100 for points in every.values())


def test_fewer_than_four_points_keep_evenly_spread_ones(run):
    """No room for a bucket's lowest and highest beside the first and the last."""
    add_points(run, "reward", [(s, s * 10.0) for s in range(1, 6)])

    assert run_metric_series(run=run, keys=["reward"], max_points=3) == {
        "reward": [[1, 10.0], [3, 30.0], [5, 50.0]]
    }
    assert run_metric_series(run=run, keys=["reward"], max_points=2) == {
        "reward": [[1, 10.0], [5, 50.0]]
    }
    assert run_metric_series(run=run, keys=["reward"], max_points=1) == {"reward": [[5, 50.0]]}


def test_a_run_without_metrics_gives_no_series(run, owner):
    other = Run.objects.create(owner=owner, name="other", config={}, model="demo:echo", max_steps=3)
    add_points(other, "loss", [(1, 1.0)])

    assert run_metric_series(run=run, keys=None, max_points=500) == {}
    assert run_metric_series(run=run, keys=["loss"], max_points=500) == {}
