"""Harbor: an OpenEnv MCP server whose `run_rollout` tool runs a whole rollout (webapp.catalog.harbor
reads its datasets, harnesses and sandboxes). A harness run's agent plays it, not GRPO's tool
calls; its capacity is measurable since a session boots no sandbox until `run_rollout`. What a
harness run must name of it is checked with the harness config (webapp.runs.services), so an
environment entry needs nothing more."""

from __future__ import annotations

from typing import Any

from webapp.catalog.harbor import harbor_probe
from webapp.catalog.kinds.kind import EnvironmentKind, RunEntry


def _nothing_more(environment: Any, entry: RunEntry) -> dict[str, str]:
    return {}


HARBOR = EnvironmentKind(
    name="harbor", label="Harbor", probe=lambda probe, ors_env, every: [harbor_probe(probe)],
    trains_in="harness", evaluable=False, capacity_measurable=True, tasks_from_server=False,
    entry_errors=_nothing_more,
)
