"""PostgreSQL stopped mid-run (issue 23 item 5), on a cluster of the test's own
(tests/support/pg_cluster.py) under a real web server and Celery worker: training goes on,
telemetry waits in the worker's bounded buffer and is stored once the database is back,
with no step missing or stored twice; kept away past ENVLAB_TELEMETRY_OUTAGE_SECONDS the run
ends interrupted with the reason, and resume finishes it. The test process reaches the lab
only over HTTP and reads the owned database with psycopg."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import psycopg
import pytest
import requests
from django.conf import settings

from tests.e2e.helpers import run_config, wait_for
from tests.envs.servers import free_port
from tests.support.chaos import Audit, ChaosRow
from tests.support.chaos_record import append_row
from tests.support.pg_cluster import PgCluster, prepare_database
from tests.support.processes import Service, start_web, start_worker

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

OUTAGE_SECONDS = 30.0


def lab_redis_url() -> str:
    """The lab's own Redis database (broker, channel layer): the session's worker (on the test
    database) would otherwise take the lab's train messages, find no such run, and drop them."""
    return settings.REDIS_URL.rsplit("/", 1)[0] + "/9"


class Lab:
    def __init__(self, cluster: PgCluster, url: str, site: str) -> None:
        self.cluster, self.url, self.site = cluster, url, site
        token = requests.post(
            f"{site}/api/auth/token/",
            json={"username": "owner", "password": "owner-pass"},
            timeout=10,
        ).json()["token"]
        self.headers = {"Authorization": f"Token {token}"}

    def post(self, path: str, body: dict[str, Any] | None = None) -> requests.Response:
        return requests.post(
            f"{self.site}{path}", json=body or {}, headers=self.headers, timeout=30
        )

    def run(self, run_id: int) -> dict[str, Any] | None:
        """The run as the API shows it; None while the web answers 503 (the database away)."""
        answer = requests.get(f"{self.site}/api/runs/{run_id}/", headers=self.headers, timeout=30)
        return None if answer.status_code == 503 else answer.json()

    def wait_status(
        self, run_id: int, statuses: tuple[str, ...], timeout: float, worker: Service
    ) -> dict:
        try:
            return wait_for(
                lambda: (run := self.run(run_id)) is not None and run["status"] in statuses and run,
                timeout,
                f"run {run_id} to reach {statuses}",
                interval=0.5,
            )
        except AssertionError:
            raise AssertionError(f"{self.run(run_id)}\n{worker.log_text()[-6000:]}") from None

    def rows(self, sql: str, *args: Any) -> list[tuple]:
        with psycopg.connect(self.url) as conn:
            return conn.execute(sql, args).fetchall()


@pytest.fixture(scope="module")
def lab(echo_url) -> Iterator[Lab]:
    if reason := PgCluster.available():
        pytest.skip(f"no PostgreSQL cluster of the test's own: {reason}")
    cluster = PgCluster().start()
    web = None
    try:
        url = cluster.create_database("lab")
        prepare_database(url)
        port = free_port()
        web = start_web(port, name="web-db-outage", DATABASE_URL=url, REDIS_URL=lab_redis_url())
        lab = Lab(cluster, url, f"http://127.0.0.1:{port}")
        answer = lab.post(
            "/api/environments/", {"name": "echo-server", "base_url": echo_url, "capacity": 64}
        )
        assert answer.status_code == 201, answer.text
        lab.env_id = int(answer.json()["id"])  # type: ignore[attr-defined]
        yield lab
    finally:
        if web is not None:
            web.stop()
        cluster.destroy()


def _chaos_row(
    request: pytest.FixtureRequest, lab: Lab, run_id: int, *, max_steps: int, **row: Any
) -> None:
    """The test's row of the chaos table (tests/support/chaos.py), its audit read from the owned
    database: the ORM of the test process is on the test database, not this one."""
    expected = set(range(1, max_steps + 1))
    metric = Counter(_metric_steps(lab, run_id, "loss"))
    rollouts = lab.rows("SELECT step, seq FROM runs_rollout WHERE run_id = %s", run_id)
    per_step = Counter(step for step, _ in rollouts)
    seqs = [seq for _, seq in rollouts]
    [(status,)] = lab.rows("SELECT status FROM runs_run WHERE id = %s", run_id)
    [(lost,)] = lab.rows("SELECT count(*) FROM runs_rollout WHERE run_id = %s AND unscored", run_id)
    audit = Audit(
        status=status,
        steps_stored=len(set(metric) & set(per_step) & expected),
        steps_missing=len(expected - (set(metric) & set(per_step))),
        steps_duplicated=sum(n - 1 for n in metric.values() if n > 1),
        rollouts_duplicated=sum(max(0, n - 4) for n in per_step.values())
        + len(seqs)
        - len(set(seqs)),
        episodes_lost=lost,
    )
    append_row(asdict(ChaosRow(audit=audit, test=request.node.nodeid, **row)))


def _metric_steps(lab: Lab, run_id: int, key: str) -> list[int]:
    return [
        s
        for (s,) in lab.rows(
            "SELECT step FROM runs_metricpoint WHERE run_id = %s AND key = %s ORDER BY step",
            run_id,
            key,
        )
    ]


def _assert_stored_once(lab: Lab, run_id: int, steps: int) -> None:
    assert _metric_steps(lab, run_id, "loss") == list(range(1, steps + 1))
    rollouts = lab.rows("SELECT seq, step FROM runs_rollout WHERE run_id = %s ORDER BY seq", run_id)
    seqs = [seq for seq, _ in rollouts]
    assert len(seqs) == len(set(seqs)) == steps * 4
    per_step = [step for _, step in rollouts]
    assert per_step == sorted(per_step)  # stored in training order
    assert {step: per_step.count(step) for step in set(per_step)} == dict.fromkeys(
        range(1, steps + 1), 4
    )
    # Rollouts share one sequence with the run's metrics and events: a step's rollouts are
    # one event, so their numbers are contiguous, and no number goes past the run's last.
    for step in range(1, steps + 1):
        numbers = [seq for seq, at in rollouts if at == step]
        assert numbers == list(range(numbers[0], numbers[0] + 4)), (step, numbers)
    [(last_seq,)] = lab.rows("SELECT last_seq FROM runs_run WHERE id = %s", run_id)
    assert max(seqs) <= last_seq


@pytest.mark.chaos
def test_postgres_stopped_30s_mid_run_training_goes_on_and_nothing_is_lost_or_doubled(
    lab, demo_model, request
):
    worker = start_worker("worker-db-outage", DATABASE_URL=lab.url, REDIS_URL=lab_redis_url())
    try:
        run_id = lab.post(
            "/api/runs/", run_config(lab.env_id, max_steps=300, save_steps=100)
        ).json()["id"]
        wait_for(lambda: (lab.run(run_id) or {}).get("step", 0) >= 3, 240, "three steps")
        down_at = lab.run(run_id)["step"]
        lab.cluster.stop()
        stopped = time.time()
        try:
            time.sleep(OUTAGE_SECONDS)
        finally:
            lab.cluster.start()
        started = time.time()
        # The backlog stored: the API shows the step the worker had reached.
        wait_for(
            lambda: (lab.run(run_id) or {}).get("step", 0) > down_at + 2, 120, "the backlog stored"
        )
        recovered = round(time.time() - started, 1)
        run = lab.wait_status(run_id, ("succeeded", "failed", "interrupted"), 600, worker)
    finally:
        worker.stop()

    _chaos_row(
        request,
        lab,
        run_id,
        max_steps=300,
        fault="PostgreSQL stopped 30 s (fast shutdown)",
        when=f"step {down_at} of 300",
        outcome=f"{run['status']} (attempt {run['attempts']})",
        recover_seconds=recovered,
        note="training went on; the backlog was stored when it came back",
    )
    assert (run["status"], run["error"], run["attempts"]) == ("succeeded", "", 1)
    _assert_stored_once(lab, run_id, 300)
    # Trained while the database was away: steps whose wall time falls in the outage.
    during = lab.rows(
        "SELECT count(*) FROM runs_metricpoint WHERE run_id = %s AND key = '_wall_time' AND value BETWEEN %s AND %s",
        run_id,
        stopped,
        started,
    )[0][0]
    [(stats,)] = lab.rows(
        "SELECT data->'telemetry' FROM runs_runevent WHERE run_id = %s AND kind = 'succeeded'",
        run_id,
    )
    print(
        f"outage {started - stopped:.1f} s: {during} steps trained meanwhile, 300 of 300 stored once; {stats}"
    )
    assert stats["dropped_events"] == 0 and stats["db_errors"] >= 1
    assert during >= 2, "training went on while the database was away"
    kinds = [
        k
        for (k,) in lab.rows("SELECT kind FROM runs_runevent WHERE run_id = %s ORDER BY id", run_id)
    ]
    assert "interrupted" not in kinds and kinds.count("succeeded") == 1


@pytest.mark.chaos
def test_postgres_away_past_the_outage_limit_interrupts_the_run_and_resume_finishes(
    lab, demo_model, request
):
    worker = start_worker(
        "worker-db-outage-short", DATABASE_URL=lab.url, REDIS_URL=lab_redis_url(), ENVLAB_TELEMETRY_OUTAGE_SECONDS="4"
    )
    try:
        run_id = lab.post("/api/runs/", run_config(lab.env_id, max_steps=80, save_steps=4)).json()[
            "id"
        ]
        wait_for(
            lambda: ((lab.run(run_id) or {}).get("checkpoint_step") or 0) >= 2, 240, "a checkpoint"
        )
        down_at = lab.run(run_id)["step"]
        lab.cluster.stop()
        try:
            time.sleep(12)  # past the 4 s limit, and a step or two for the worker to notice
        finally:
            lab.cluster.start()
        run = lab.wait_status(run_id, ("interrupted", "failed", "succeeded"), 180, worker)
        assert run["status"] == "interrupted", run
        assert "ENVLAB_TELEMETRY_OUTAGE_SECONDS" in run["error"] and "Resume it" in run["error"]
        assert (run["failure"], run["resumable"]) == ("", True)
        interrupted_at = run["step"]
        print(f"interrupted at step {interrupted_at}: {run['error']}")
        assert lab.post(f"/api/runs/{run_id}/resume/").status_code == 200
        run = lab.wait_status(run_id, ("succeeded", "failed", "interrupted"), 600, worker)
    finally:
        worker.stop()
    _chaos_row(
        request,
        lab,
        run_id,
        max_steps=80,
        fault="PostgreSQL stopped 12 s, ENVLAB_TELEMETRY_OUTAGE_SECONDS=4",
        when=f"step {down_at} of 80",
        outcome=f"interrupted at step {interrupted_at}, resumed: {run['status']}",
        recover_seconds=None,
        note="past the limit the run stops interrupted; resume trains what was not stored",
    )
    assert (run["status"], run["attempts"]) == ("succeeded", 2), run
    _assert_stored_once(lab, run_id, 80)
