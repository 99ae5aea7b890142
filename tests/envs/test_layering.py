"""Imports point one way: the environment layer (servers' registry, adapters, outbound
rules, solvers) is imported by the web app and the worker, and imports neither."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_environment_layer_imports_no_webapp_or_worker_module() -> None:
    code = (
        "import sys, envs.registry, envs.netguard, envs.adapters, envs.adapters.generic, "
        "envs.adapters.ors, envs.adapters.attributes, envs.adapters.router, envs.solvers; "
        "print(sorted({m for m in sys.modules if m.split('.')[0] in ('webapp', 'worker')}))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "[]\n", "")
