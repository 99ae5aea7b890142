"""Open Reward Standard: probed by `/list_environments` (one server may host several
environments, each registered apart), trained on with GRPO through the ORS adapter. Its tasks,
and their prompts, come from the server's splits, so a run entry names a split the server has;
the lab's own tool loop does not play it, and its servers state no session limit to measure."""

from __future__ import annotations

from typing import Any

from webapp.catalog.kinds.kind import EnvironmentKind, RunEntry
from webapp.catalog.probe import ors_results


def _known_split(environment: Any, entry: RunEntry) -> dict[str, str]:
    splits = (environment.metadata or {}).get("splits") or {}
    if not splits or entry.split in splits:
        return {}
    return {"split": f"'{environment.name}' has splits {', '.join(sorted(splits))}, not '{entry.split}'"}


ORS = EnvironmentKind(
    name="ors", label="Open Reward Standard", probe=lambda probe, ors_env, every: ors_results(probe, ors_env, every=every),
    trains_in="grpo", evaluable=False, capacity_measurable=False, tasks_from_server=True,
    entry_errors=_known_split,
)
