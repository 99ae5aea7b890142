"""`python -m bench.learning_table --quick` end to end (issue 8 item 6): the command sets up its own
scratch installation (SQLite, its own Redis database, uvicorn, a Celery worker, the bundled
catch server started by the app's launcher), drives base -> evaluation -> SFT warm-up ->
evaluation -> GRPO -> evaluation through the REST API, and writes the table.

Checked against what it stored: the scratch database is read back here, and every number of
the table is recomputed from the stored evaluation episodes. Slow: a tiny base build, a
one-step warm-up, two GRPO steps and three evaluations of 4 episodes (about 3 minutes on 2
shared cores). Nothing is mocked."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings

# The command alone may take 900 s (its subprocess timeout below), more than the default.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.sqlite_pass, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
EPISODES = 4  # --quick's evaluation episodes
GRPO_STEPS = 2  # --quick's GRPO steps


def scratch_redis_url() -> str:
    """Not the tests' own Redis database: a worker of this session listens there and would take
    the scratch installation's tasks. ENVLAB_LEARNING_TABLE_REDIS_URL overrides it."""
    given = os.environ.get("ENVLAB_LEARNING_TABLE_REDIS_URL")
    if given:
        return given
    parts = urlsplit(settings.REDIS_URL)
    db = int(parts.path.strip("/") or 0)
    return urlunsplit((parts.scheme, parts.netloc, f"/{(db + 1) % 16}", "", ""))


def test_quick_learning_table_through_the_api(tmp_path):
    scratch = tmp_path / "learning-table"
    output = tmp_path / "table.json"
    recorded = (ROOT / "bench" / "results" / "learning_table.json").read_bytes()
    benchmarks = (ROOT / "BENCHMARKS.md").read_bytes()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.local",
        "ENVLAB_VAR_DIR": str(tmp_path / "var"),
        "ENVLAB_TORCH_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "bench.learning_table", "--quick", "--seeds", "3",
         "--dir", str(scratch), "--output", str(output), "--redis-url", scratch_redis_url()],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    logs = "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in (scratch / "log").glob("*.log")
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}\n{logs}"
    # Progress lines name each phase.
    for phase in ("building the catch-base model", "base: evaluation", "SFT warm-up run",
                  "SFT: evaluation", "GRPO run", "SFT+GRPO: evaluation", "written to"):
        assert phase in done.stdout, done.stdout  # fmt: skip
    # A --quick run with its own --output leaves the recorded table and BENCHMARKS.md alone.
    assert (ROOT / "bench" / "results" / "learning_table.json").read_bytes() == recorded
    assert (ROOT / "BENCHMARKS.md").read_bytes() == benchmarks

    table = json.loads(output.read_text())
    assert table["seeds"] == [3]
    assert table["columns"][:4] == ["seed", "base", "SFT", "SFT+GRPO"]
    (entry,) = table["per_seed"]
    assert entry["seed"] == 3
    catches = {phase: entry[phase]["catches"] for phase in ("base", "sft", "grpo")}
    for value in catches.values():
        assert type(value) is int and 0 <= value <= EPISODES
    assert table["rows"][0][:5] == [
        3, catches["base"], catches["sft"], catches["grpo"], catches["grpo"] - catches["sft"]
    ]  # fmt: skip
    assert table["verdict"].startswith("quick smoke check, numbers meaningless.")

    db = sqlite3.connect(scratch / "db.sqlite3")
    db.row_factory = sqlite3.Row
    runs = {row["id"]: row for row in db.execute("SELECT * FROM runs_run")}
    sft_run, grpo_run = runs[entry["sft"]["run"]], runs[entry["grpo"]["run"]]
    assert (sft_run["status"], grpo_run["status"]) == ("succeeded", "succeeded")
    sft_config, grpo_config = json.loads(sft_run["config"]), json.loads(grpo_run["config"])
    assert sft_config["grpo"] is None
    assert sft_config["sft_warmup"]["source"] == "solver"
    assert sft_config["model"] == "demo:catch-base-4x3-quick-s3"
    assert grpo_config["model"] == {"run": sft_run["id"], "checkpoint": 0}
    assert grpo_config["environments"][0]["reset"] == {"rows": 4, "columns": 3}
    # The saved recipe, resolved at launch: an unfinished episode scores -1.
    assert [t["params"] for t in grpo_config["rewards"]["terms"]] == [
        {"expression": "reward if reward != 0 else -1"}
    ]
    assert grpo_run["step"] == GRPO_STEPS
    assert [step for step, _ in entry["grpo"]["reward_curve"]] == [1, 2]

    seeds_by_phase = {}
    for phase, model in (
        ("base", "demo:catch-base-4x3-quick-s3"),
        ("sft", {"run": sft_run["id"], "checkpoint": 0}),
        ("grpo", {"run": grpo_run["id"], "checkpoint": GRPO_STEPS}),  # "last", pinned
    ):
        evaluation = db.execute(
            "SELECT * FROM evaluations_evaluation WHERE id = ?", (entry[phase]["evaluation"],)
        ).fetchone()
        assert evaluation["status"] == "succeeded"
        assert [m["spec"] for m in json.loads(evaluation["model_specs"])] == [model]
        assert json.loads(evaluation["settings"])["reset"] == {"rows": 4, "columns": 3}
        episodes = db.execute(
            "SELECT seed, attributes, messages FROM evaluations_evaluationepisode "
            "WHERE evaluation_id = ? ORDER BY model_index, \"index\"",
            (evaluation["id"],),
        ).fetchall()
        assert len(episodes) == EPISODES
        recomputed = sum(int(json.loads(e["attributes"]).get("catches", 0)) for e in episodes)
        assert recomputed == entry[phase]["catches"]
        # The 4 x 3 grid: three moves before the ball lands.
        first = json.loads(episodes[0]["messages"])[0]["content"]
        assert first.startswith("Catch the ball: use move or stay.\n")
        assert "Rows left: 3." in first
        # Caught of each ball column: the column read off each episode's first board ("o").
        by_column: dict[str, list[int]] = {}
        for e in episodes:
            top_row = json.loads(e["messages"])[0]["content"].splitlines()[1].split()
            caught = by_column.setdefault(str(top_row.index("o")), [0, 0])
            caught[0] += int(json.loads(e["attributes"]).get("catches", 0))
            caught[1] += 1
        assert entry[phase]["by_column"] == dict(sorted(by_column.items()))
        seeds_by_phase[phase] = [e["seed"] for e in episodes]
    # Every model played the same episodes.
    assert seeds_by_phase["base"] == seeds_by_phase["sft"] == seeds_by_phase["grpo"]
    # Everything the command started was stopped.
    server = db.execute("SELECT status, pid FROM catalog_bundledserver WHERE key = 'catch'").fetchone()
    assert server["status"] == "stopped"
