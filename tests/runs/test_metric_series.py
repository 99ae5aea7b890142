"""selectors.run_metric_series: long series are cut into aligned step buckets keeping each
bucket's lowest and highest point, so a one-step spike survives, read from pre-aggregated
tiers (webapp/runs/telemetry/metric_tiers.py) that follow replaced and rewound steps; short series
come back as they are. Runs on SQLite and, with DATABASE_URL, on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import RunFactory
from webapp.runs.models import MetricPoint, MetricTier, MetricTierMark, Run
from webapp.runs.services import run_rewind
from webapp.runs.telemetry.record import telemetry_record
from webapp.runs.telemetry.series import run_metric_series

pytestmark = pytest.mark.django_db

STEPS = 100_000
SPIKE_STEP, SPIKE = 61_234, 50.0
DIP_STEP, DIP = 7, -50.0
WIDTHS = sorted({2**j for j in range(34)} | {3 * 2**j for j in range(34)})


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
    """The rule, written plainly: the narrowest width of 1, 2, 3, 4, 6, 8, 12, 16, 24, ...
    whose aligned step ranges (multiples of the width) from the first step to the last number
    at most (max_points - 2) // 2; each range gives its lowest and highest point (the
    earliest on a tie), plus the first and the last point."""
    buckets = (max_points - 2) // 2
    first, last = points[0][0], points[-1][0]
    width = next(w for w in WIDTHS if last // w - first // w + 1 <= buckets)
    picked = {points[0], points[-1]}
    ranges: dict[int, list[tuple[int, float]]] = {}
    for point in points:
        ranges.setdefault(point[0] // width, []).append(point)
    for inside in ranges.values():
        picked.add(min(inside, key=lambda p: (p[1], p[0])))
        picked.add(min(inside, key=lambda p: (-p[1], p[0])))
    return [[s, v] for s, v in sorted(picked)]


def tier_rows(run: Run, key: str) -> list[tuple[int, int, int, float, int, float]]:
    return list(
        MetricTier.objects.filter(run=run, key=key)
        .order_by("width", "start")
        .values_list("width", "start", "min_step", "min_value", "max_step", "max_value")
    )


def expected_tiers(points: list[tuple[int, float]], through: int) -> list[tuple[int, int, int, float, int, float]]:
    """Every block of width 16 * 2**j ending at or below `through` that holds points."""
    rows = []
    width = 16
    while width <= through:
        ranges: dict[int, list[tuple[int, float]]] = {}
        for point in points:
            if point[0] // width * width + width <= through:
                ranges.setdefault(point[0] // width, []).append(point)
        for bucket, inside in sorted(ranges.items()):
            low = min(inside, key=lambda p: (p[1], p[0]))
            high = min(inside, key=lambda p: (-p[1], p[0]))
            rows.append((width, bucket * width, low[0], low[1], high[0], high[1]))
        width *= 2
    return rows


@pytest.fixture
def run(owner):
    return RunFactory(owner=owner, name="long", max_steps=STEPS)


def test_a_one_step_spike_on_100k_steps_survives_500_points_through_tiers(run, api):
    points = [(s, long_series(s)) for s in range(1, STEPS + 1)]
    add_points(run, "loss", points)

    series = run_metric_series(run=run, keys=["loss"], max_points=500)

    loss = series["loss"]
    assert list(series) == ["loss"]
    assert loss == expected_buckets(points, 500)
    # Width 512 (at 384, 100 000 // 384 + 1 = 261 ranges > 249): 196 ranges of two points,
    # plus the first and the last point, neither its range's lowest or highest.
    assert len(loss) == 2 * 196 + 2
    assert loss[0] == [1, noise(1)]
    assert loss[-1] == [STEPS, noise(STEPS)]
    assert [SPIKE_STEP, SPIKE] in loss
    assert [DIP_STEP, DIP] in loss
    assert [s for s, _ in loss] == sorted({s for s, _ in loss})
    # The tiers were made for every complete block below the newest step (100 000 = 6250 * 16:
    # the newest point starts the one open block).
    assert MetricTierMark.objects.filter(run=run).values_list("key", "through_step", "seq").get() == (
        "loss", STEPS, STEPS,
    )
    assert tier_rows(run, "loss") == expected_tiers(points, STEPS)

    # A second read takes the rows made by the first: a few queries, none of them a write,
    # and about max_points rows read, not the 100 000 points.
    with CaptureQueriesContext(connection) as queries:
        again = run_metric_series(run=run, keys=["loss"], max_points=500)
    assert again == series
    assert not [q["sql"] for q in queries if q["sql"].split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]
    assert len(queries) <= 10
    response = api.get(f"/api/runs/{run.pk}/metrics/?key=loss&max_points=500")
    assert response.status_code == 200
    assert response.json() == {"series": {"loss": loss}}


def test_tiers_grow_with_the_run_and_the_newest_block_comes_from_the_points(run):
    points = [(s, long_series(s)) for s in range(1, 20_001)]
    add_points(run, "loss", points[:10_007])
    early = run_metric_series(run=run, keys=["loss"], max_points=200)
    assert MetricTierMark.objects.get(run=run).through_step == 10_000

    add_points(run, "loss", points[10_007:])
    later = run_metric_series(run=run, keys=["loss"], max_points=200)

    assert early == {"loss": expected_buckets(points[:10_007], 200)}
    assert later == {"loss": expected_buckets(points, 200)}
    assert MetricTierMark.objects.filter(run=run).values_list("through_step", "seq").get() == (20_000, 20_000)
    assert tier_rows(run, "loss") == expected_tiers(points, 20_000)


def test_points_in_the_open_block_are_read_from_the_points_and_leave_the_tiers_alone(run):
    points = [(s, long_series(s)) for s in range(1, 10_011)]
    add_points(run, "loss", points[:10_003])
    run_metric_series(run=run, keys=["loss"], max_points=200)
    made = tier_rows(run, "loss")
    add_points(run, "loss", [*points[10_003:-1], (10_010, 99.0)])  # a spike in the open block

    series = run_metric_series(run=run, keys=["loss"], max_points=200)

    assert series == {"loss": expected_buckets([*points[:-1], (10_010, 99.0)], 200)}
    assert series["loss"][-1] == [10_010, 99.0]
    assert tier_rows(run, "loss") == made
    # The new points were checked once: the next read does not look at them again.
    assert MetricTierMark.objects.filter(run=run).values_list("through_step", "seq").get() == (10_000, 10_010)


def lease(run: Run, *, last_seq: int) -> str:
    """The run as a worker holding its lease sees it: telemetry_record writes only then."""
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, lease_owner="worker-1", last_seq=last_seq)
    return "worker-1"


def test_a_replaced_step_drops_the_tiers_from_its_block_on(run):
    points = [(s, noise(s)) for s in range(1, 5_001)]
    add_points(run, "loss", points)
    before = run_metric_series(run=run, keys=["loss"], max_points=100)
    assert [3_003, 40.0] not in before["loss"]
    owner = lease(run, last_seq=5_000)

    # A step redone after a resume: the same step, a new value, a new (higher) seq.
    telemetry_record(run_id=run.pk, lease_owner=owner, events=[("metrics", (3_003, {"loss": 40.0}))])
    after = run_metric_series(run=run, keys=["loss"], max_points=100)

    replaced = [(s, 40.0 if s == 3_003 else v) for s, v in points]
    assert after == {"loss": expected_buckets(replaced, 100)}
    assert [3_003, 40.0] in after["loss"]
    assert MetricPoint.objects.get(run=run, key="loss", step=3_003).seq == 5_001
    assert MetricTierMark.objects.filter(run=run).values_list("through_step", "seq").get() == (4_992, 5_001)
    assert tier_rows(run, "loss") == expected_tiers(replaced, 4_992)


def test_a_rewind_drops_the_tiers_after_its_step_and_the_redone_steps_make_new_ones(run):
    points = [(s, noise(s)) for s in range(1, 5_001)]
    add_points(run, "loss", points)
    run_metric_series(run=run, keys=["loss"], max_points=100)
    owner = lease(run, last_seq=5_000)

    assert run_rewind(run_id=run.pk, lease_owner=owner, to_step=2_500)

    # The rows holding steps after 2 500 are gone, and the mark says so, before any read.
    assert MetricTierMark.objects.get(run=run).through_step == 2_496
    assert tier_rows(run, "loss") == expected_tiers(points[:2_500], 2_496)
    rewound = run_metric_series(run=run, keys=["loss"], max_points=100)
    assert rewound == {"loss": expected_buckets(points[:2_500], 100)}

    redone = [(s, noise(s) + 2.0) for s in range(2_501, 4_001)]
    for step, value in redone:
        telemetry_record(run_id=run.pk, lease_owner=owner, events=[("metrics", (step, {"loss": value}))])
    again = run_metric_series(run=run, keys=["loss"], max_points=100)

    assert again == {"loss": expected_buckets(points[:2_500] + redone, 100)}
    assert tier_rows(run, "loss") == expected_tiers(points[:2_500] + redone, 4_000)


def test_rows_above_the_newest_step_are_dropped_even_without_the_rewind_hook(run):
    """A read that made rows from points a concurrent rewind was deleting: the next read
    finds rows above the key's newest step and drops them."""
    points = [(s, noise(s)) for s in range(1, 5_001)]
    add_points(run, "loss", points)
    run_metric_series(run=run, keys=["loss"], max_points=100)
    MetricPoint.objects.filter(run=run, step__gt=3_000).delete()

    series = run_metric_series(run=run, keys=["loss"], max_points=100)

    assert series == {"loss": expected_buckets(points[:3_000], 100)}
    assert MetricTierMark.objects.get(run=run).through_step == 2_992
    assert tier_rows(run, "loss") == expected_tiers(points[:3_000], 2_992)


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
    other = RunFactory(owner=owner, name="other", max_steps=3)
    add_points(other, "loss", [(1, 1.0)])

    assert run_metric_series(run=run, keys=None, max_points=500) == {}
    assert run_metric_series(run=run, keys=["loss"], max_points=500) == {}
