"""Where an environment's capacity came from, and how it is shown.

`metadata["capacity_source"]` says it; only a lower bound (a measurement that stopped before
the server refused) lets a larger generation batch launch, with a warning
(webapp.runs.services). A declared, measured or learned capacity is the server's limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CAPACITY_DECLARED = "declared"
CAPACITY_PROBED = "probed"
CAPACITY_AT_LEAST = "probed (at least)"
CAPACITY_LEARNED = "learned from a refusal"

_STOPPED = {
    "deadline": "measured; the measurement ran out of time",
    "limit": "measured; the measurement stopped at its session limit",
}


def _metadata(environment: Any) -> Mapping[str, Any]:
    metadata = getattr(environment, "metadata", None)
    return metadata if isinstance(metadata, Mapping) else {}


def capacity_is_lower_bound(environment: Any) -> bool:
    return _metadata(environment).get("capacity_source") == CAPACITY_AT_LEAST


def _learned_where(learned: Any) -> str:
    learned = learned if isinstance(learned, Mapping) else {}
    run, step, phase = learned.get("run"), learned.get("step"), learned.get("phase")
    evaluation = learned.get("evaluation")
    if isinstance(evaluation, int):
        return f" in evaluation {evaluation}"
    if not isinstance(run, int):
        return ""
    if phase == "warmup":
        return f" during the warm-up of run {run}"
    return f" at step {step} of run {run}" if isinstance(step, int) else f" in run {run}"


def capacity_shown(environment: Any) -> tuple[str, str]:
    """The capacity as the environment's page shows it and where it came from:
    ("at least 22", "measured; the measurement ran out of time"), ("1", "learned when the
    server refused a session at step 3 of run 7"), ("not declared", "")."""
    capacity = getattr(environment, "capacity", None)
    if capacity is None:
        return "not declared", ""
    metadata = _metadata(environment)
    source = str(metadata.get("capacity_source", ""))
    if source == CAPACITY_AT_LEAST:
        why = _STOPPED.get(str(metadata.get("capacity_stopped_by", "")), "measured; the measurement stopped early")
        return f"at least {capacity}", why
    if source == CAPACITY_LEARNED:
        return str(capacity), f"learned when the server refused a session{_learned_where(metadata.get('capacity_learned'))}"
    return str(capacity), source


def capacity_note(environment: Any) -> str:
    """capacity_shown in one line: "at least 22 (measured; the measurement ran out of time)"."""
    shown, source = capacity_shown(environment)
    return f"{shown} ({source})" if source else shown
