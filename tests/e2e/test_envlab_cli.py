"""The `envlab` command (client/, envlab-client) against a live lab: the real ASGI web server,
a real Celery worker and the real echo server. One short training run (3 steps), launched and
watched by the command in the module's fixture, is shared by the tests that read it back.

The module's rows are made and read outside any test transaction: the web server and the
worker, other processes, write the same database while the tests run, and a transactional
test's flush would take the shared run with it. No test is marked `django_db`: the `web` and
`worker` fixtures set the test database up, and pytest-django runs unmarked tests last, after
every database test, so this module's live worker is not yet there to take the tasks that the
database tests find queued in Redis (a marked test here ran first and started it for them).
The database is flushed after the module, as a transactional test leaves it."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import requests

from tests.e2e.helpers import run_config

# One real training run (minutes on shared cores): `make test` runs it on one database.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.sqlite_pass]

ENVLAB = Path(sys.executable).parent / "envlab"
MAX_STEPS = 3


@dataclass
class Lab:
    web: str
    config_dir: Path
    login: subprocess.CompletedProcess[str]
    launch: subprocess.CompletedProcess[str]
    run_id: int
    owner_id: int
    environment_id: int
    echo_url: str


def envlab(*args: str, config_dir: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    if not ENVLAB.exists():
        pytest.fail(f"{ENVLAB} is missing: make install puts envlab-client (client/) in the lab's venv")
    env = {k: v for k, v in os.environ.items() if k not in ("ENVLAB_URL", "ENVLAB_TOKEN")}
    env["ENVLAB_CONFIG_DIR"] = str(config_dir)
    return subprocess.run(
        [str(ENVLAB), *args], capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )


@pytest.fixture(scope="module")
def lab(web, worker, echo_url, django_db_blocker, tmp_path_factory) -> Iterator[Lab]:
    from django.core.management import call_command
    from django.db import connection

    from tests.factories import UserFactory
    from webapp.catalog.services import environment_register

    # Never the developer's own database: the module flushes the one it wrote to.
    name, test_name = str(connection.settings_dict["NAME"]), (connection.settings_dict.get("TEST") or {}).get("NAME")
    if name != str(test_name) if test_name else not name.startswith("test_"):
        pytest.fail("the test database is not set up (the web and worker fixtures set it up)")
    folder = tmp_path_factory.mktemp("envlab-cli")
    config_dir = folder / "config"
    try:
        with django_db_blocker.unblock():
            owner = UserFactory(username="cli-owner", password="cli-owner-pw")
            # The bundled name, as the bundled registration makes it (tests/e2e/helpers.py).
            env = environment_register(
                owner=owner, name="echo", base_url=echo_url, allow_reserved_name=True, capacity=64
            )
        config = folder / "demo.json"
        config.write_text(json.dumps(run_config(env.pk, max_steps=MAX_STEPS, save_steps=10)))
        login = envlab(
            "login", "--url", web, "--username", "cli-owner", "--password", "cli-owner-pw", config_dir=config_dir
        )
        assert login.returncode == 0, login.stderr
        launch = envlab("runs", "launch", str(config), "--watch", config_dir=config_dir, timeout=600)
        first = launch.stdout.splitlines()[0] if launch.stdout else ""
        assert first.startswith("run ") and first.endswith(": queued"), (launch.stdout, launch.stderr, worker.log_text()[-4000:])
        yield Lab(web, config_dir, login, launch, int(first.split()[1]), owner.pk, env.pk, echo_url)
    finally:
        with django_db_blocker.unblock():
            call_command("flush", verbosity=0, interactive=False)


def _db_read(django_db_blocker, read):
    with django_db_blocker.unblock():
        return read()


def test_login_stores_the_url_and_a_working_token_readable_by_its_user_alone(lab, django_db_blocker):
    from knox.models import AuthToken

    path = lab.config_dir / "login.json"
    assert lab.login.stdout == f"logged in to {lab.web}; token stored in {path}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(path.read_text())
    assert stored["url"] == lab.web
    assert _db_read(django_db_blocker, lambda: AuthToken.objects.filter(user_id=lab.owner_id).count()) == 1
    answer = requests.get(f"{lab.web}/api/runs/{lab.run_id}/", headers={"Authorization": f"Token {stored['token']}"},
                          timeout=30)
    assert (answer.status_code, answer.json()["owner"]) == (200, "cli-owner")


def test_launch_watch_prints_one_line_per_step_and_exits_0_on_success(lab, django_db_blocker):
    from webapp.runs.models import Run

    run = _db_read(django_db_blocker, lambda: Run.objects.get(pk=lab.run_id))
    assert (lab.launch.returncode, run.status, run.step) == (0, "succeeded", MAX_STEPS), lab.launch.stderr
    lines = lab.launch.stdout.splitlines()
    steps = [line for line in lines if line.startswith("step ")]
    assert [line.split()[1] for line in steps] == [f"{s}/{MAX_STEPS}" for s in range(1, MAX_STEPS + 1)]
    assert all("reward " in line for line in steps)
    assert lines == [lines[0], *steps, f"run {lab.run_id} succeeded at step {MAX_STEPS}/{MAX_STEPS}"]


def test_metrics_csv_has_one_row_per_stored_point(lab, django_db_blocker):
    from webapp.runs.models import MetricPoint

    out = lab.config_dir.parent / "reward.csv"
    done = envlab("runs", "metrics", str(lab.run_id), "--key", "reward", "--format", "csv", "-o", str(out),
                  config_dir=lab.config_dir)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    points = _db_read(django_db_blocker, lambda: list(
        MetricPoint.objects.filter(run_id=lab.run_id, key="reward").order_by("step").values_list("step", "value")
    ))
    assert len(points) >= MAX_STEPS
    assert [(int(r["step"]), float(r["value"])) for r in rows] == points
    assert {r["key"] for r in rows} == {"reward"}


def test_rollouts_parquet_has_the_export_endpoints_rows(lab):
    out = lab.config_dir.parent / "rollouts.parquet"
    done = envlab("runs", "rollouts", str(lab.run_id), "--format", "parquet", "-o", str(out), config_dir=lab.config_dir)
    assert done.returncode == 0, done.stderr
    token = json.loads((lab.config_dir / "login.json").read_text())["token"]
    served = requests.get(f"{lab.web}/api/runs/{lab.run_id}/rollouts/export/?format=parquet",
                          headers={"Authorization": f"Token {token}"}, timeout=60)
    from_cli = pq.read_table(out).to_pylist()
    assert from_cli == pq.read_table(io.BytesIO(served.content)).to_pylist()
    assert len(from_cli) == MAX_STEPS * 4  # per_device_train_batch_size 4, one generation batch a step


def test_the_list_and_show_commands_print_what_the_api_answers(lab):
    def ok(*args: str) -> str:
        done = envlab(*args, config_dir=lab.config_dir)
        assert done.returncode == 0, done.stderr
        return done.stdout

    environments = json.loads(ok("envs", "list", "--json"))
    assert [(e["name"], e["kind"]) for e in environments] == [("echo", "openenv")]
    runs = ok("runs", "list").splitlines()
    assert runs[0] == "id\tname\tstatus\tstep\tmax_steps\tmodel\tcreated_at"
    assert [line.split("\t")[:5] for line in runs[1:]] == [[str(lab.run_id), "e2e", "succeeded", "3", "3"]]
    shown = json.loads(ok("runs", "show", str(lab.run_id)))
    assert (shown["id"], shown["status"], shown["owner"]) == (lab.run_id, "succeeded", "cli-owner")
    assert "reward" in ok("runs", "keys", str(lab.run_id)).splitlines()
    assert json.loads(ok("recipes", "list", "--json")) == []
    cancel = envlab("runs", "cancel", str(lab.run_id), config_dir=lab.config_dir)
    assert (cancel.returncode, cancel.stderr) == (
        1, "error: only queued or running runs can be cancelled; this one is succeeded (HTTP 409)\n"
    )


def test_register_probe_and_evaluate_from_the_shell(lab, django_db_blocker):
    from webapp.catalog.models import Environment

    registered = envlab("envs", "register", "my-echo", "--url", lab.echo_url, "--capacity", "8",
                        config_dir=lab.config_dir)
    assert registered.returncode == 0, registered.stderr
    mine = _db_read(django_db_blocker, lambda: Environment.objects.get(owner_id=lab.owner_id, name="my-echo"))
    assert registered.stdout == f"environment {mine.pk} my-echo (openenv): healthy\n"
    assert (mine.base_url, mine.capacity) == (lab.echo_url, 8)
    probed = envlab("envs", "probe", str(mine.pk), config_dir=lab.config_dir)
    assert (probed.returncode, probed.stdout) == (0, f"environment {mine.pk} my-echo: healthy\n")
    twice = envlab("envs", "register", "my-echo", "--url", lab.echo_url, config_dir=lab.config_dir)
    assert twice.returncode == 1
    assert twice.stderr == "error: name: you already have an environment named 'my-echo' (HTTP 400)\n"

    evaluated = envlab("evals", "run", "--env", str(lab.environment_id), "-m", "solver", "--episodes", "2",
                       "--wait", "--json", config_dir=lab.config_dir, timeout=300)
    assert evaluated.returncode == 0, evaluated.stderr
    evaluation = json.loads(evaluated.stdout)
    assert (evaluation["status"], evaluation["episodes"]) == ("succeeded", 2)
    assert len(evaluation["results"]) == 1


def test_another_users_login_is_told_the_run_does_not_exist(lab, django_db_blocker, tmp_path):
    from tests.factories import UserFactory

    _db_read(django_db_blocker, lambda: UserFactory(username="cli-outsider", password="cli-outsider-pw"))
    login = envlab("login", "--url", lab.web, "--username", "cli-outsider", "--password", "cli-outsider-pw",
                   config_dir=tmp_path)
    assert login.returncode == 0, login.stderr
    out = tmp_path / "reward.csv"
    done = envlab("runs", "metrics", str(lab.run_id), "--key", "reward", "-o", str(out), config_dir=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "error: No Run matches the given query. (HTTP 404)\n"
    assert not out.exists()


def test_a_wrong_password_is_refused_and_stores_nothing(lab, tmp_path, django_db_blocker):
    from knox.models import AuthToken

    done = envlab("login", "--url", lab.web, "--username", "cli-owner", "--password", "wrong", config_dir=tmp_path)
    assert done.returncode == 1
    assert done.stderr == "error: Unable to log in with provided credentials. (HTTP 400)\n"
    assert not (tmp_path / "login.json").exists()
    assert _db_read(django_db_blocker, lambda: AuthToken.objects.filter(user_id=lab.owner_id).count()) == 1
