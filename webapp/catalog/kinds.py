"""The kinds of environment server the lab knows (OpenEnv, Open Reward Standard, Harbor), each
described in one place: how it is probed, what a run trains on it with (GRPO, or a harness
run), whether evaluations and the arena play it, whether its capacity can be measured, and
what a run config's environment entry must say for it. Probing, registration, launch checks
and evaluations read these instead of branching on a kind's name; a new kind is one more
`EnvironmentKind` here. (The worker's adapter binding is envs/adapters' `base_adapter`: envs
know nothing of the lab.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from webapp.catalog.harbor import harbor_probe
from webapp.catalog.probe import (
    OrsChoiceNeeded,
    PathMissing,
    openenv_result,
    ors_results,
)
from webapp.catalog.probe_http import ProbeError, ProbeSession, ServerUnreadable
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


def _prompt_needed(environment: Any, entry: RunEntry) -> dict[str, str]:
    if entry.prompt.strip():
        return {}
    return {"prompt": f"give the prompt of each '{environment.name}' episode (only ORS tasks bring their own)"}


def _known_split(environment: Any, entry: RunEntry) -> dict[str, str]:
    splits = (environment.metadata or {}).get("splits") or {}
    if not splits or entry.split in splits:
        return {}
    return {"split": f"'{environment.name}' has splits {', '.join(sorted(splits))}, not '{entry.split}'"}


def _nothing_more(environment: Any, entry: RunEntry) -> dict[str, str]:
    return {}


OPENENV = EnvironmentKind(
    name="openenv", label="OpenEnv", probe=lambda probe, ors_env, every: [openenv_result(probe)],
    trains_in="grpo", evaluable=True, capacity_measurable=True, tasks_from_server=False,
    entry_errors=_prompt_needed,
)
ORS = EnvironmentKind(
    name="ors", label="Open Reward Standard", probe=lambda probe, ors_env, every: ors_results(probe, ors_env, every=every),
    trains_in="grpo", evaluable=False, capacity_measurable=False, tasks_from_server=True,
    entry_errors=_known_split,
)
HARBOR = EnvironmentKind(
    name="harbor", label="Harbor", probe=lambda probe, ors_env, every: [harbor_probe(probe)],
    trains_in="harness", evaluable=False, capacity_measurable=True, tasks_from_server=False,
    entry_errors=_nothing_more,
)
KINDS: dict[str, EnvironmentKind] = {kind.name: kind for kind in (OPENENV, ORS, HARBOR)}


def environment_kind(name: str) -> EnvironmentKind | None:
    """The kind named `name` (an Environment row's `kind`), or None for one the lab does not know."""
    return KINDS.get(name)


def kind_names() -> str:
    """'openenv, ors or harbor', for messages."""
    names = list(KINDS)
    return ", ".join(names[:-1]) + f" or {names[-1]}"


# --- probing by kind, or detecting it ---------------------------------------------------------


def probe_environment(
    base_url: str, *, kind: str | None = None, ors_env: str = "", timeout: float | None = None
) -> ProbeResult:
    """Probe by kind, or detect it: an OpenEnv server answers `/schema`; an ORS one `/list_environments`.

    Detection shares one deadline and one `/health` read: a server that does not answer
    is not asked again under the other kind's name. An ORS server hosting several
    environments needs `ors_env` here (`probe_environments` reads them all).
    """
    return _probe(base_url, kind=kind, ors_env=ors_env, timeout=timeout, every=False)[0]


def probe_environments(
    base_url: str, *, kind: str | None = None, ors_env: str = "", timeout: float | None = None
) -> list[ProbeResult]:
    """As `probe_environment`, but an ORS server hosting several environments, with no
    `ors_env` chosen, gives one result per environment, in the server's order (at most
    MAX_ORS_ENVIRONMENTS), all read within the one deadline: one fails, the probe fails."""
    return _probe(base_url, kind=kind, ors_env=ors_env, timeout=timeout, every=True)


def _probe(
    base_url: str, *, kind: str | None, ors_env: str, timeout: float | None, every: bool
) -> list[ProbeResult]:
    chosen = environment_kind(kind) if kind else None
    if kind and chosen is None:
        raise ProbeError(f"kind '{kind}' cannot be probed over HTTP")
    with ProbeSession(base_url, timeout) as probe:
        if chosen is not None:
            return chosen.probe(probe, ors_env, every)
        return _detected(probe, ors_env, every=every)


def _detected(probe: ProbeSession, ors_env: str, *, every: bool) -> list[ProbeResult]:
    try:
        detected = openenv_result(probe)
    except ProbeError as openenv_error:
        if probe.health is None or probe.expired:
            raise
        try:
            return ors_results(probe, ors_env, every=every)
        except OrsChoiceNeeded:
            raise  # it is an ORS server: the OpenEnv attempt's failure is beside the point
        except ProbeError as ors_error:
            if isinstance(openenv_error, ServerUnreadable) and isinstance(ors_error, ServerUnreadable):
                raise ors_error from None
            if isinstance(openenv_error, PathMissing) and isinstance(ors_error, PathMissing | ServerUnreadable):
                # It answers as neither kind: what it lacks of OpenEnv's (the nearer kind,
                # whose /health it shares) is the one reason; the ORS miss adds no other.
                raise openenv_error from None
            raise ProbeError(
                f"not an OpenEnv server ({openenv_error}) nor an Open Reward Standard server ({ors_error})"
            ) from None
    # A Harbor server answers as an OpenEnv MCP server too; its `run_rollout` tool tells it
    # apart (registering it as OpenEnv would let GRPO runs call that tool as a model's tool).
    if detected.metadata.get("style") == "mcp" and any(t.get("name") == "run_rollout" for t in detected.tools):
        return HARBOR.probe(probe, ors_env, every)
    return [detected]
