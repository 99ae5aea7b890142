"""The kinds of environment server the lab knows (OpenEnv, Open Reward Standard, Harbor), one
module each (openenv.py, ors.py, harbor.py) saying how it is probed, what a run trains on it
with (GRPO, or a harness run), whether evaluations and the arena play it, whether its capacity
can be measured, and what a run config's environment entry must say for it. Probing,
registration, launch checks and evaluations read these instead of branching on a kind's name;
a new kind is one more module and one more entry in `KINDS`. (What envs know of each kind, the
worker's adapter binding among it, is envs/adapters/kinds: envs know nothing of the lab.)"""

from __future__ import annotations

from webapp.catalog.kinds.harbor import HARBOR
from webapp.catalog.kinds.kind import EnvironmentKind, RunEntry
from webapp.catalog.kinds.openenv import OPENENV
from webapp.catalog.kinds.ors import ORS
from webapp.catalog.probe import (
    OrsChoiceNeeded,
    PathMissing,
    openenv_result,
    ors_results,
)
from webapp.catalog.probe_http import ProbeError, ProbeSession, ServerUnreadable
from webapp.catalog.probe_result import ProbeResult

__all__ = [
    "HARBOR", "KINDS", "OPENENV", "ORS", "EnvironmentKind", "RunEntry", "environment_kind", "kind_names",
    "probe_environment", "probe_environments",
]

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
