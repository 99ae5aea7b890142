"""Imports point one way: the environment layer (servers' registry, adapters, outbound
rules, solvers) is imported by the web app and the worker, and imports neither."""

from __future__ import annotations

from tests.support.processes import modules_imported


def test_the_environment_layer_imports_no_webapp_or_worker_module() -> None:
    run = modules_imported(
        "envs.registry, envs.netguard, envs.adapters, envs.adapters.generic, envs.adapters.ors, "
        "envs.adapters.attributes, envs.adapters.router, envs.solvers",
        {"webapp", "worker"},
        timeout=120,
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "[]\n", "")
