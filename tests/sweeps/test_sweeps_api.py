"""POST /api/sweeps/, GET /api/sweeps/ and /api/sweeps/<id>/, POST /api/sweeps/<id>/cancel-rest/:
every member checked before anything is written, runs made pending beyond the quota, the rest
cancelled on request; owner, viewer (runs.view_run) and outsider."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory
from tests.fixtures.accounts import grant, token_client
from tests.sweeps.conftest import GRID
from webapp.runs.models import MetricPoint, Run, RunEvent
from webapp.sweeps.models import Sweep, SweepMember

pytestmark = pytest.mark.django_db


def _create(api, base, **extra):
    return api.post("/api/sweeps/", {"name": "lr-seeds", "base": base, "grid": GRID, **extra}, format="json")


def _nothing_written():
    assert (Sweep.objects.count(), SweepMember.objects.count(), Run.objects.count(), RunEvent.objects.count()) == (
        0, 0, 0, 0,
    )


def test_a_2x3_sweep_makes_six_runs_in_its_group_two_queued_within_the_quota(api, base, quota_of_two):
    response = _create(api, base)
    assert response.status_code == 201, response.json()
    body = response.json()
    sweep = Sweep.objects.get()
    assert (body["id"], body["name"], body["method"], body["status"], body["size"]) == (
        sweep.pk, "lr-seeds", "grid", "active", 6,
    )
    assert body["statuses"] == {"pending": 4, "queued": 2}
    assert body["paths"] == ["grpo.learning_rate", "grpo.seed"]
    assert [(m["index"], m["status"], m["params"]) for m in body["members"]] == [
        (0, "queued", {"grpo.learning_rate": 1e-5, "grpo.seed": 0}),
        (1, "queued", {"grpo.learning_rate": 1e-5, "grpo.seed": 1}),
        (2, "pending", {"grpo.learning_rate": 1e-5, "grpo.seed": 2}),
        (3, "pending", {"grpo.learning_rate": 1e-4, "grpo.seed": 0}),
        (4, "pending", {"grpo.learning_rate": 1e-4, "grpo.seed": 1}),
        (5, "pending", {"grpo.learning_rate": 1e-4, "grpo.seed": 2}),
    ]
    runs = list(Run.objects.order_by("sweep_member__index"))
    assert [r.name for r in runs] == [f"lr-seeds #{i}" for i in range(6)]
    assert {r.group for r in runs} == {"lr-seeds"}
    assert [(r.config["grpo"]["learning_rate"], r.config["grpo"]["seed"], r.config["name"]) for r in runs] == [
        (lr, seed, f"lr-seeds #{i}") for i, (lr, seed) in enumerate((a, b) for a in (1e-5, 1e-4) for b in (0, 1, 2))
    ]
    # Pending runs were sent nowhere; the queued ones once.
    assert [(r.status, r.sends, r.sent_at is None) for r in runs] == [
        ("queued", 1, False), ("queued", 1, False), *[("pending", 0, True)] * 4,
    ]
    assert list(RunEvent.objects.filter(run=runs[0]).values_list("kind", flat=True)) == ["pending", "queued"]
    assert list(RunEvent.objects.filter(run=runs[2]).values_list("kind", "message")) == [
        ("pending", f"Pending in sweep 'lr-seeds' (#{sweep.pk}): queued when a slot of your quota is free."),
    ]
    assert list(SweepMember.objects.order_by("index").values_list("index", "params")) == [
        (m["index"], m["params"]) for m in body["members"]
    ]


def test_an_unnamed_sweep_is_named_and_grouped_by_its_id(api, base, quota_of_two):
    response = api.post("/api/sweeps/", {"base": base, "grid": {"grpo.seed": [0, 1]}}, format="json")
    assert response.status_code == 201, response.json()
    sweep = Sweep.objects.get()
    assert sweep.name == f"sweep-{sweep.pk}"
    assert set(Run.objects.values_list("group", flat=True)) == {f"sweep-{sweep.pk}"}


def test_paths_reach_environment_rows_and_reward_weights(api, base, quota_of_two):
    grid = {"environments.0.rows": [4, 8], "rewards.1.weight": [0.1, 0.5]}
    response = api.post("/api/sweeps/", {"name": "s", "base": base, "grid": grid}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["paths"] == ["environments.0.rows", "rewards.1.weight"]
    configs = [r.config for r in Run.objects.order_by("sweep_member__index")]
    assert [(c["environments"][0]["rows"], c["rewards"][1]["weight"]) for c in configs] == [
        (4, 0.1), (4, 0.5), (8, 0.1), (8, 0.5),
    ]


def test_an_invalid_member_refuses_the_whole_sweep_and_writes_nothing(api, base, quota_of_two):
    response = api.post(
        "/api/sweeps/",
        {"name": "s", "base": base, "grid": {"grpo.seed": [0, 1], "grpo.learning_rate": [1e-5, -1.0]}},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "members.1.grpo.learning_rate": ["Input should be greater than 0"],
        "members.3.grpo.learning_rate": ["Input should be greater than 0"],
    }
    _nothing_written()


def test_a_member_refused_by_the_launch_checks_names_its_index(api, base, quota_of_two):
    # The schema takes any environment id; the launch's check finds no such environment.
    response = api.post(
        "/api/sweeps/",
        {"name": "s", "base": base, "grid": {"environments.0.environment": [base["environments"][0]["environment"], 999999]}},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {"members.1.environments.0.environment": ["no environment with id 999999"]}
    _nothing_written()


@pytest.mark.parametrize(("body", "errors"), [
    ({"grid": {"grpo.seed": list(range(65))}},
     {"grid.grpo.seed": ["at most 64 values (this list has 65)"]}),
    ({"grid": {"grpo.seed": list(range(13)), "grpo.learning_rate": [1e-5, 2e-5, 3e-5, 4e-5, 5e-5]}},
     {"grid": ["a sweep has at most 64 members; this one has 65 (13 x 5)"]}),
    ({"grid": {"environments.3.rows": [1, 2]}},
     {"grid.environments.3.rows": ["environments has 1 item(s): there is no item 3"]}),
    ({"grid": {"grpo.seed": [0, 1]}, "method": "random", "count": 3},
     {"count": ["the grid has 2 combinations: a random sweep draws at most that many"]}),
    ({"grid": {"grpo.seed": [0, 1]}, "method": "random"},
     {"count": ["a random sweep draws `count` members: a whole number of at least 1"]}),
    ({"grid": {"grpo.seed": [0, 1]}, "count": 1},
     {"count": ['only a "random" sweep takes count and seed']}),
    ({"grid": {"grpo.seed": [0, 1]}, "method": "bayes", "extra": 1},
     {"non_field_errors": ["a sweep takes name, base, grid, method, count, seed; not extra"],
      "method": ["one of grid, random"]}),
])
def test_a_malformed_sweep_is_refused_naming_the_field(api, base, quota_of_two, body, errors):
    response = api.post("/api/sweeps/", {"name": "s", "base": base, **body}, format="json")
    assert response.status_code == 400
    assert response.json() == errors
    _nothing_written()


def test_a_random_sweep_draws_count_members_with_its_stored_seed(api, base, quota_of_two):
    grid = {"grpo.seed": [0, 1, 2, 3], "grpo.learning_rate": [1e-5, 1e-4]}
    first = api.post("/api/sweeps/", {"name": "a", "base": base, "grid": grid, "method": "random", "count": 3,
                                      "seed": 11}, format="json")
    assert first.status_code == 201, first.json()
    again = api.post("/api/sweeps/", {"name": "b", "base": base, "grid": grid, "method": "random", "count": 3},
                     format="json")
    assert again.status_code == 201, again.json()
    a, b = Sweep.objects.get(name="a"), Sweep.objects.get(name="b")
    assert (a.method, a.count, a.seed) == ("random", 3, 11)
    assert b.seed is not None and 0 <= b.seed < 2**31
    params = [m["params"] for m in first.json()["members"]]
    assert len({tuple(sorted(p.items())) for p in params}) == 3
    from webapp.sweeps.grid import grid_members

    assert list(a.members.order_by("index").values_list("params", flat=True)) == grid_members(
        grid, method="random", count=3, seed=11
    )


def test_cancel_rest_cancels_the_pending_and_leaves_the_queued(api, base, quota_of_two):
    sweep_id = _create(api, base).json()["id"]
    response = api.post(f"/api/sweeps/{sweep_id}/cancel-rest/")
    assert response.status_code == 200, response.json()
    pending_ids = list(Run.objects.filter(sweep_member__index__gte=2).order_by("sweep_member__index").values_list("pk", flat=True))
    assert response.json()["cancelled"] == pending_ids
    assert response.json()["sweep"]["status"] == "cancelled"
    assert response.json()["sweep"]["statuses"] == {"cancelled": 4, "queued": 2}
    assert list(Run.objects.order_by("sweep_member__index").values_list("status", flat=True)) == [
        "queued", "queued", "cancelled", "cancelled", "cancelled", "cancelled",
    ]
    event = RunEvent.objects.filter(run_id=pending_ids[0]).order_by("id").last()
    assert (event.kind, event.data) == ("cancelled", {"reason": "sweep_cancel_rest", "sweep": sweep_id, "member": 2})
    assert event.message == f"Cancelled before it started: the rest of sweep 'lr-seeds' (#{sweep_id}) was cancelled."
    # Twice: nothing more to cancel.
    again = api.post(f"/api/sweeps/{sweep_id}/cancel-rest/")
    assert (again.status_code, again.json()["cancelled"]) == (200, [])
    assert RunEvent.objects.filter(kind="cancelled").count() == 4


def test_only_the_owner_sees_and_cancels_a_sweep_a_viewer_sees(api, base, quota_of_two, outsider_api):
    sweep_id = _create(api, base).json()["id"]
    viewer = token_client(grant(UserFactory(username="viewer"), "runs.view_run"))
    # The outsider: as if it did not exist.
    assert outsider_api.get("/api/sweeps/").json() == []
    assert outsider_api.get(f"/api/sweeps/{sweep_id}/").status_code == 404
    assert outsider_api.post(f"/api/sweeps/{sweep_id}/cancel-rest/").status_code == 404
    # A viewer of every run reads it, and may not cancel it.
    assert [s["id"] for s in viewer.get("/api/sweeps/").json()] == [sweep_id]
    assert viewer.get(f"/api/sweeps/{sweep_id}/").status_code == 200
    refused = viewer.post(f"/api/sweeps/{sweep_id}/cancel-rest/")
    assert refused.status_code == 403
    assert Run.objects.filter(status="pending").count() == 4
    assert Sweep.objects.get().status == "active"
    # The owner.
    assert [s["id"] for s in api.get("/api/sweeps/").json()] == [sweep_id]
    assert api.post(f"/api/sweeps/{sweep_id}/cancel-rest/").status_code == 200
    assert Run.objects.filter(status="pending").count() == 0


def test_detail_summarises_the_chosen_metric_per_member(api, base, quota_of_two):
    sweep_id = _create(api, base).json()["id"]
    runs = list(Run.objects.order_by("sweep_member__index"))
    MetricPoint.objects.bulk_create([
        MetricPoint(run=runs[0], step=1, key="reward", value=0.25, seq=1),
        MetricPoint(run=runs[0], step=2, key="reward", value=0.5, seq=2),
        MetricPoint(run=runs[1], step=1, key="loss", value=3.0, seq=1),
    ])
    reward = api.get(f"/api/sweeps/{sweep_id}/").json()
    assert reward["metric"] == "reward"
    assert [m["summary"] for m in reward["members"]] == [
        {"last": 0.5, "max": 0.5, "min": 0.25, "step": 2}, None, None, None, None, None,
    ]
    loss = api.get(f"/api/sweeps/{sweep_id}/", {"metric": "loss"}).json()
    assert [m["summary"] for m in loss["members"]] == [None, {"last": 3.0, "max": 3.0, "min": 3.0, "step": 1}, None, None, None, None]
