"""OpenEnv, the kind most servers are: probed by its `/schema` (classic) or its MCP tools, trained
on with GRPO calling its tools, played by evaluations and the arena, and measured for capacity
(its servers refuse a session past their limit with CAPACITY_REACHED). Its episodes' prompts
come from the run config, so an entry without one cannot launch."""

from __future__ import annotations

from typing import Any

from webapp.catalog.kinds.kind import EnvironmentKind, RunEntry
from webapp.catalog.probe import openenv_result


def _prompt_needed(environment: Any, entry: RunEntry) -> dict[str, str]:
    if entry.prompt.strip():
        return {}
    return {"prompt": f"give the prompt of each '{environment.name}' episode (only ORS tasks bring their own)"}


OPENENV = EnvironmentKind(
    name="openenv", label="OpenEnv", probe=lambda probe, ors_env, every: [openenv_result(probe)],
    trains_in="grpo", evaluable=True, capacity_measurable=True, tasks_from_server=False,
    entry_errors=_prompt_needed,
)
