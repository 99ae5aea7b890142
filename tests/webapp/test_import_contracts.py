"""The import contracts (pyproject.toml [tool.importlinter], run by `make lint` and `make test`)
catch what they promise: each case adds one throwaway module to a copy of the tree, never to
the tree itself, and `lint-imports` must then fail naming the import."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for package in ("webapp", "worker", "envs", "bench", "tests"):
        shutil.copytree(REPO_ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    # The copy, not the editable install, must be what grimp finds.
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )


def broken_contracts(report: str) -> list[str]:
    """The headings of the report's broken contracts: a name underlined with dashes."""
    lines = report.split("Broken contracts", 1)[1].splitlines()[2:]
    return [
        line for line, under in itertools.pairwise(lines)
        if line and under == "-" * len(line)
    ]


@pytest.fixture
def added(tree: Path):
    made: list[Path] = []

    def add(relative: str, source: str) -> None:
        path = tree / relative
        path.write_text(source)
        made.append(path)

    yield add
    for path in made:
        path.unlink()


def test_the_tree_as_it_is_keeps_every_contract(tree: Path) -> None:
    result = lint(tree)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "BROKEN" not in result.stdout
    assert result.stdout.count("KEPT") == 6


@pytest.mark.parametrize(
    ("relative", "source", "broken", "named"),
    [
        # A lower app importing a higher one, even inside a function, as the old code hid it.
        ("webapp/core/zz_upward.py", "def f():\n    from webapp.runs.models import Run\n    return Run\n",
         "webapp's apps are layered", "webapp.core.zz_upward -> webapp.runs.models"),
        ("webapp/catalog/zz_upward.py", "from webapp.workbench import learnability\n",
         "webapp's apps are layered", "webapp.catalog.zz_upward -> webapp.workbench.learnability"),
        ("webapp/runs/zz_torch.py", "def f():\n    import torch\n    return torch\n",
         "the web app imports no training code", "webapp.runs.zz_torch -> torch"),
        ("webapp/runs/zz_worker.py", "from worker import tasks\n",
         "the web app imports no training code", "webapp.runs.zz_worker -> worker.tasks"),
        ("envs/zz_lab.py", "from webapp.runs import models\n",
         "environments know nothing of the lab", "envs.zz_lab -> webapp.runs.models"),
        ("worker/play/zz_trainer.py", "def f():\n    from worker.training import runner\n    return runner\n",
         "the worker's training and play are independent", "worker.play.zz_trainer -> worker.training.runner"),
        ("worker/zz_bench.py", "from bench import common\n",
         "product code never imports benchmarks or tests", "worker.zz_bench -> bench.common"),
    ],
)  # fmt: skip
def test_a_forbidden_import_breaks_its_contract(tree, added, relative, source, broken, named) -> None:
    added(relative, source)
    result = lint(tree)
    assert result.returncode == 1, result.stdout[-3000:]
    # The contract meant is among the broken (an upward import is a circle between apps too),
    # and the report names the import.
    assert any(name.startswith(broken) for name in broken_contracts(result.stdout)), result.stdout[-3000:]
    assert named in result.stdout.split("Broken contracts", 1)[1], result.stdout[-3000:]


def test_a_circle_between_two_modules_of_one_package_breaks_the_acyclic_contract(tree, added) -> None:
    added("envs/zz_one.py", "from envs import zz_two\n")
    added("envs/zz_two.py", "def f():\n    from envs import zz_one\n    return zz_one\n")
    result = lint(tree)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "No cycles are allowed in envs." in result.stdout
    assert ".zz_one -> .zz_two" in result.stdout or ".zz_two -> .zz_one" in result.stdout
