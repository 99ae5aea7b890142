"""A sixth environment from its folder alone: tests/support/tally_env (a lab.py, an OpenEnv
server, a client, an adapter and a solver) added through envs.registry.register_folder, with
no product table edited. It is then listed, served as a bundled server (a real uvicorn
process), registered as that bundled server, and evaluated by the worker's evaluation
player in this process, through its own adapter and solver."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from envs.registry import ADAPTERS, BUNDLED, PLUGINS_VAR, RegistryError, register, register_folder
from envs.spec import BundledSpec
from tests.support.processes import fresh_python

REPO_ROOT = Path(__file__).resolve().parents[2]
TALLY_DIR = REPO_ROOT / "tests" / "support" / "tally_env"


@pytest.fixture
def tally() -> Iterator[BundledSpec]:
    assert "tally" not in BUNDLED
    spec = register_folder(TALLY_DIR)
    yield spec
    # The registry is this process's: the next test must not see tally.
    BUNDLED.pop("tally")
    ADAPTERS.pop("tally")


def test_every_table_about_an_environment_reads_the_registered_spec(tally: BundledSpec) -> None:
    from envs.adapters.attributes import ATTRIBUTES
    from envs.solvers import SOLVERS, solver_class
    from tests.support.tally_env.solver import TallySolver
    from webapp.evaluations.arena.replay import renderer_for
    from webapp.evaluations.config import DEFAULT_PROMPTS
    from webapp.evaluations.selectors import ENVIRONMENT_COLUMNS, evaluation_columns
    from webapp.workbench.learnability import ENV_RANGES

    assert (BUNDLED["tally"], ADAPTERS["tally"]) == (tally, tally.adapter)
    assert list(BUNDLED)[-1] == "tally"
    assert SOLVERS["tally"] == "tests.support.tally_env.solver.TallySolver"
    assert solver_class("tally") is TallySolver
    assert ATTRIBUTES["tally"][:2] == [
        ("won", "1 if the tally ended exactly on the target"),
        ("overshoot", "how far past the target the tally ended (0 to 2)"),
    ]
    assert list(ATTRIBUTES)[-2:] == ["tally", "harbor"]
    assert ENV_RANGES["tally"] == {"overshoot": (0.0, 2.0)}
    assert DEFAULT_PROMPTS["tally"] == "Bring the tally exactly to the target with the add tool."
    assert ENVIRONMENT_COLUMNS["tally"] == [
        ("overshoots", "episodes that went past the target"),
        ("total_overshoot", "how far past the target, all episodes"),
    ]
    assert evaluation_columns(key="tally")[-2:] == ["overshoots", "total_overshoot"]
    assert renderer_for("tally") == "transcript"  # it names no replay script

    # Registering it again changes nothing; another spec on its key or port is refused.
    assert register_folder(TALLY_DIR) is tally
    with pytest.raises(RegistryError, match="environment 'tally' has the key of 'tally'"):
        register(dataclasses.replace(tally, title="Another tally"))
    with pytest.raises(RegistryError, match="environment 'other' has the port of 'tally'"):
        register(dataclasses.replace(tally, key="other", marker="other", adapter=None))
    assert (BUNDLED["tally"], "other" in BUNDLED) == (tally, False)


@pytest.fixture
def tally_server(tally: BundledSpec, settings: Any, tmp_path: Path) -> Iterator[Any]:
    from webapp.catalog.bundled import bundled_start, bundled_stop

    settings.VAR_DIR = tmp_path  # the server's log goes under the test's folder
    server = bundled_start(key="tally", capacity=4)
    try:
        yield server
    finally:
        bundled_stop(key="tally", grace=5)


@pytest.mark.django_db
def test_an_environment_folder_is_listed_served_registered_and_evaluated(
    tally_server: Any, owner: Any, settings: Any
) -> None:
    from tests.envs.servers import is_healthy
    from webapp.catalog.bundled import bundled_register
    from webapp.evaluations.models import EvaluationEpisode
    from webapp.evaluations.selectors import evaluation_results
    from webapp.evaluations.services import evaluation_claim, evaluation_create
    from worker.play.evaluation import evaluate

    # The lease is not what this test is about, and the heartbeat thread's own database
    # connection cannot see this test's uncommitted rows: no beat while it runs.
    settings.ENVLAB_HEARTBEAT_SECONDS = 600
    server = tally_server
    assert (server.status, server.capacity, is_healthy(server.url)) == ("running", 4, True)

    client = Client()
    client.force_login(owner)
    page = client.get(reverse("environment-list")).content.decode()
    assert 'data-key="tally" data-status="running"' in page

    (environment,) = bundled_register(key="tally", owner=owner)
    assert (environment.name, environment.status, environment.base_url) == ("tally", "healthy", server.url)
    assert (environment.metadata["style"], environment.metadata["adapter"]) == ("bundled", "tally")
    assert [tool["name"] for tool in environment.tools] == ["add"]

    evaluation = evaluation_create(
        owner=owner,
        data={"environment": environment.pk, "models": ["solver", "random"], "episodes": 3, "seed": 2},
    )
    assert (evaluation.environment_key, evaluation.prompt) == (
        "tally", "Bring the tally exactly to the target with the add tool.",
    )
    claim = evaluation_claim(evaluation_id=evaluation.pk, lease_owner="lease-a", worker_name="test")
    assert claim.outcome == "claimed"
    assert evaluate(evaluation_id=evaluation.pk, lease_owner="lease-a") == "succeeded"

    episodes = list(EvaluationEpisode.objects.filter(evaluation=evaluation).order_by("model_index", "index"))
    solver = [e for e in episodes if e.model_index == 0]
    # The solver adds 3 until what is left is 3 or less: it lands on the target every time.
    targets = [4 + e.seed % 5 for e in solver]
    assert [(e.reward, e.won, e.tool_calls, e.tool_failures) for e in solver] == [
        (1.0, True, -(-target // 3), 0) for target in targets
    ]
    assert [e.attributes["overshoot"] for e in solver] == [0.0, 0.0, 0.0]
    rows = evaluation_results(evaluation=evaluation)
    assert rows[0] == {
        "model": "solver", "episodes": 3, "mean_reward": 1.0, "wins": 3,
        "tool_calls": sum(-(-target // 3) for target in targets), "tool_failures": 0,
        "overshoots": 0, "total_overshoot": 0,
    }  # fmt: skip
    random = [e for e in episodes if e.model_index == 1]
    assert [e.seed for e in random] == [e.seed for e in solver]
    assert (rows[1]["model"], rows[1]["episodes"]) == ("random", 3)
    assert rows[1]["overshoots"] == sum(1 for e in random if e.attributes.get("overshoot", 0) > 0)
    assert rows[1]["total_overshoot"] == sum(int(e.attributes.get("overshoot", 0)) for e in random)


def test_every_process_of_an_installation_loads_the_folders_named_in_its_environment() -> None:
    # A fresh interpreter, as the web server, a worker and envlab_setup each are: the variable
    # is how they all know the plugin. Reading the specs loads no openenv (they name adapters
    # and solvers by dotted path).
    code = (
        "import sys, envs.registry as r; "
        "print(list(r.BUNDLED), list(r.ADAPTERS), r.solver_keys(), 'openenv' in sys.modules)"
    )
    run = fresh_python(code, timeout=120, env={**os.environ, PLUGINS_VAR: str(TALLY_DIR)})
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout == (
        "['echo', 'wordle', 'catch', 'sudoku', 'mcpdemo', 'ors', 'tally'] "
        "['echo', 'wordle', 'catch', 'sudoku', 'tally'] "
        "('echo', 'wordle', 'catch', 'sudoku', 'tally') False\n"
    )


def test_a_folder_without_a_lab_spec_is_refused_with_what_to_fix(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match=r"lab.py does not exist: an environment folder declares itself in lab.py"):
        register_folder(tmp_path)
    (tmp_path / "lab.py").write_text("LAB = 'not a spec'\n")
    with pytest.raises(RegistryError, match=r"lab.py must define LAB, an envs.spec.BundledSpec"):
        register_folder(tmp_path)
    assert list(BUNDLED) == ["echo", "wordle", "catch", "sudoku", "mcpdemo", "ors"]
