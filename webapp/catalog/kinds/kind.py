"""What the lab needs to know of one kind of environment server, as each kind's module
(openenv, ors, harbor) describes it. Apart from the package's `__init__` so that those modules
can import it while the package is still being imported."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from webapp.catalog.probe_http import ProbeSession
from webapp.catalog.probe_result import ProbeResult


class RunEntry(Protocol):
    """What the kinds read of one run config environment entry (webapp.runs.config)."""

    prompt: str
    split: str


@dataclass(frozen=True)
class EnvironmentKind:
    name: str
    label: str
    # Reads a server of this kind in one probe session: (session, ors_env, every) -> results.
    probe: Callable[[ProbeSession, str, bool], list[ProbeResult]]
    # "grpo": GRPO runs call its tools; "harness": a harness run's agent plays it (TRL's async trainer).
    trains_in: Literal["grpo", "harness"]
    # Evaluations and the arena play its episodes with the lab's own tool loop.
    evaluable: bool
    # Its servers refuse a session past their limit with CAPACITY_REACHED, so capacity can be
    # measured (a Harbor server is an OpenEnv server; a session boots no sandbox until `run_rollout`).
    capacity_measurable: bool
    # Its episodes' tasks come from the server (their prompts too), not from the run config.
    tasks_from_server: bool
    # Checks of one run-config entry for an environment of this kind: {entry field: message}.
    entry_errors: Callable[[Any, RunEntry], dict[str, str]]
