"""Reading an environment server over the wire: kind, health, metadata, tools, capacity.

Everything a server returns is untrusted: shapes are checked and text is bounded here,
at the edge, before anything is stored. The reads themselves (checked addresses, no
redirects, capped bodies, one deadline per probe) are `probe_http`'s.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from django.conf import settings

from envs import netguard
from envs.registry import MARKER_PATH, AdapterSpec, bundled_match  # the one registry
from webapp.catalog.probe_http import (
    ProbeError,
    ProbeSession,
    ServerAnsweredStatus,
    ServerUnreadable,
    normalise_base_url,
    probe_timeout,
)
from webapp.catalog.probe_result import MAX_TOOLS, ProbeResult, clean_parameters, clip_text
from webapp.catalog.toolschema import describe_tools

_WS_MAX_MESSAGE = 64 * 1024


class OrsChoiceNeeded(ProbeError):
    """The server is an ORS server, but which of its environments to register must be chosen."""


class PathMissing(ProbeError):
    """The server answers `/health` but not the path its kind is read from. Saying which
    (and the status) tells nothing about the network that `/health` answering did not."""


# The first openenv-core release whose servers serve `/schema` (added 2025-11-18, meta-pytorch/OpenEnv ff1bd7c6).
OPENENV_SCHEMA_SINCE = "0.2.0"


def _tool(name: Any, description: Any, parameters: Any) -> dict[str, Any]:
    return {"name": clip_text(name, 100), "description": clip_text(description), "parameters": clean_parameters(parameters)}


# --- OpenEnv -------------------------------------------------------------------------------


def _mcp_tools(probe: ProbeSession) -> list[dict[str, Any]]:
    """Raw tools of an MCP-style OpenEnv server (JSON-RPC `tools/list` on /mcp); [] for a classic one."""
    try:
        answer = probe.json("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    except ProbeError:
        if probe.expired:
            raise
        return []
    result = answer.get("result") if isinstance(answer, dict) else None
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return []
    return [t for t in tools[:MAX_TOOLS] if isinstance(t, dict) and isinstance(t.get("name"), str)]


def _generated_tools(
    base_url: str, metadata: dict[str, Any], schema: dict[str, Any], mcp_tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The tools of the adapter the worker will generate for this server, as the model sees
    them (envs.adapters.generic imports no openenv at module level: cheap here)."""
    from envs.adapters import generic

    name = metadata.get("name") or "environment"
    try:
        if mcp_tools:
            cls = generic.mcp_adapter_class(base_url=base_url, env_name=name, tools=mcp_tools)
        else:
            cls = generic.classic_adapter_class(
                base_url=base_url, env_name=name, schema=schema, description=metadata.get("description", "")
            )
    except (ValueError, TypeError) as exc:
        raise ProbeError(f"the server's tools cannot be offered to a model: {clip_text(exc, 300)}") from None
    return [_tool(t["name"], t["description"], t["parameters"]) for t in describe_tools(cls)][:MAX_TOOLS]


def _bundled_marker(probe: ProbeSession) -> Any:
    """The server's envlab marker (`GET /envlab`); None for a server that has none."""
    try:
        return probe.json("GET", MARKER_PATH)
    except ProbeError:
        if probe.expired:
            raise
        return None


def _bundled_tools(spec: AdapterSpec) -> list[dict[str, Any]]:
    import importlib


    module_name, _, class_name = spec.adapter_path.rpartition(".")
    # Adapter modules import openenv lazily, so this import is cheap (no torch, no openenv).
    return describe_tools(getattr(importlib.import_module(module_name), class_name))


def probe_openenv(base_url: str, *, timeout: float | None = None) -> ProbeResult:
    """Read `/health`, `/metadata`, `/schema` (and `/mcp` tools). ProbeError when it is no OpenEnv server."""
    with ProbeSession(base_url, timeout) as probe:
        return openenv_result(probe)


def _no_schema(probe: ProbeSession, status: int) -> PathMissing:
    try:
        answered = "/health and /metadata" if isinstance(probe.json("GET", "/metadata"), dict) else "/health"
    except ProbeError:
        if probe.expired:
            raise
        answered = "/health"
    if status in (404, 405, 410):
        return PathMissing(
            f"the server answers {answered} but has no /schema (HTTP {status}): envlab reads an "
            "OpenEnv server's action (the arguments its tools take) from /schema. Is it an OpenEnv "
            f"server older than openenv-core {OPENENV_SCHEMA_SINCE} (update it), or not an OpenEnv server?"
        )
    return PathMissing(
        f"the server answers {answered} but /schema fails (HTTP {status}): envlab reads an "
        "OpenEnv server's action (the arguments its tools take) from /schema; see the server's log"
    )


def openenv_result(probe: ProbeSession) -> ProbeResult:
    """An OpenEnv server read in `probe`'s session. ProbeError when it is none."""
    health = probe.read_health()
    try:
        schema = probe.json("GET", "/schema")
    except ServerAnsweredStatus as exc:
        raise _no_schema(probe, exc.status) from None
    if not isinstance(schema, dict) or not isinstance(schema.get("action"), dict):
        raise ProbeError("/schema has no 'action' object: not an OpenEnv server")
    metadata_raw = probe.json("GET", "/metadata")
    if not isinstance(metadata_raw, dict):
        raise ProbeError("/metadata is not a JSON object")
    metadata = {
        key: clip_text(metadata_raw.get(key))
        for key in ("name", "description", "version", "author")
        if metadata_raw.get(key) is not None
    }
    # The bundled adapter only for the bundled server itself (marker and action both match),
    # whatever name a server reports; the decision is stored for the worker (base_adapter).
    spec = bundled_match(_bundled_marker(probe), schema)
    if spec is not None:
        metadata["style"], metadata["adapter"] = "bundled", spec.key
        tools = _bundled_tools(spec)
    else:
        mcp_tools = _mcp_tools(probe)
        metadata["style"] = "mcp" if mcp_tools else "classic"
        tools = _generated_tools(probe.base_url, metadata, schema, mcp_tools)
    healthy = str(health.get("status")).lower() in ("healthy", "ok")
    return ProbeResult(
        healthy=healthy, kind="openenv", metadata=metadata, tools=tools,
        # The status text is the server's: not repeated, it could be anything.
        error="" if healthy else "/health does not report the server healthy",
    )


# --- Open Reward Standard ------------------------------------------------------------------


def ors_environments(base_url: str, *, timeout: float | None = None) -> list[str]:
    """The environment names an ORS server hosts. ProbeError when it is no ORS server."""
    with ProbeSession(base_url, timeout) as probe:
        return _ors_names(probe)


def _ors_names(probe: ProbeSession) -> list[str]:
    probe.read_health()
    try:
        names = probe.json("GET", "/list_environments")
    except ServerAnsweredStatus as exc:
        raise PathMissing(
            f"the server answers /health but not /list_environments (HTTP {exc.status}): an Open Reward "
            "Standard server lists its environments there, so this is not one"
        ) from None
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ProbeError("/list_environments did not return environment names: not an ORS server")
    return [clip_text(n, 100) for n in names[:100]]


def probe_ors(
    base_url: str, *, env_name: str, timeout: float | None = None, names: list[str] | None = None
) -> ProbeResult:
    """Read one ORS environment: tools, splits and task counts (`names`: the server's
    environments, when the caller has just listed them)."""
    with ProbeSession(base_url, timeout) as probe:
        return _ors(probe, env_name, names if names is not None else _ors_names(probe))


def _ors(probe: ProbeSession, env_name: str, names: list[str]) -> ProbeResult:
    if env_name not in names:
        raise ProbeError(f"the server hosts {', '.join(names)}; no environment named '{env_name}'")
    prefix = f"/{quote(env_name, safe='')}"
    listed = probe.json("GET", f"{prefix}/tools")
    raw_splits = probe.json("GET", f"{prefix}/splits")
    tools_raw = listed.get("tools") if isinstance(listed, dict) else None
    if not isinstance(tools_raw, list) or not isinstance(raw_splits, list):
        raise ProbeError(f"{prefix}/tools or /splits is not in the Open Reward Standard shape")
    splits: dict[str, int | None] = {}
    for split in raw_splits[:20]:
        name = split.get("name") if isinstance(split, dict) else split
        if not isinstance(name, str):
            continue
        try:
            count = probe.json("POST", f"{prefix}/num_tasks", {"split": name})
            splits[clip_text(name, 64)] = int(count["num_tasks"])
        except (ProbeError, KeyError, TypeError, ValueError):
            if probe.expired:
                raise ServerUnreadable(probe.base_url) from None
            splits[clip_text(name, 64)] = None
    tools = [
        _tool(t.get("name"), t.get("description"), t.get("input_schema"))
        for t in tools_raw[:MAX_TOOLS]
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]
    return ProbeResult(
        healthy=True, kind="ors", tools=tools,
        metadata={"name": clip_text(env_name, 100), "ors_env": clip_text(env_name, 100), "splits": splits,
                  "environments": names},
    )


# A multi-environment ORS server registered without `ors_env` is probed environment by
# environment within the one deadline; past this many, the user picks one (a request that
# writes dozens of catalog entries is more likely a mistake than a wish).
MAX_ORS_ENVIRONMENTS = 20


def ors_results(probe: ProbeSession, ors_env: str, *, every: bool) -> list[ProbeResult]:
    """Probe `ors_env`, or the server's only environment, or (`every`) each of its environments;
    several and none chosen, without `every`, is an error."""
    names = _ors_names(probe)
    if ors_env or len(names) == 1:
        return [_ors(probe, ors_env or names[0], names)]
    if not every:
        raise OrsChoiceNeeded(f"the server hosts several environments ({', '.join(names)}): choose one (ors_env)")
    if len(names) > MAX_ORS_ENVIRONMENTS:
        raise OrsChoiceNeeded(
            f"the server hosts {len(names)} environments; at most {MAX_ORS_ENVIRONMENTS} are registered "
            "at once: choose one (ors_env)"
        )
    return [_ors(probe, name, names) for name in names]


# --- capacity -----------------------------------------------------------------------------


@dataclass
class CapacityResult:
    capacity: int
    at_least: bool  # the probe stopped before the server refused
    # Why an "at least" stopped: "deadline" (ENVLAB_PROBE_DEADLINE passed) or "limit" (its session cap).
    stopped_by: str = ""


def probe_capacity(base_url: str, *, limit: int = 256, timeout: float | None = None) -> CapacityResult:
    """Open WebSocket sessions on `/ws` until the server answers CAPACITY_REACHED, then close them all.

    OpenEnv servers do not report their capacity; this measures it. Each session is a
    real environment instance on the server (no episode is started: a `state` request
    proves the session). Sessions held by running trainings count against it. The whole
    measurement has one deadline (ENVLAB_PROBE_DEADLINE): when it passes with sessions
    open, the result is "at least" that many.
    """
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    per_request = probe_timeout(timeout)
    base_url = normalise_base_url(base_url)
    parts = urlsplit(base_url)
    address = (parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
    ws_url = base_url.replace("https://", "wss://", 1).replace("http://", "ws://", 1) + "/ws"
    ends = time.monotonic() + float(settings.ENVLAB_PROBE_DEADLINE)
    sessions: list[Any] = []
    try:
        while len(sessions) < limit:
            left = ends - time.monotonic()
            if left <= 0:
                if not sessions:
                    raise ServerUnreadable(base_url)
                return CapacityResult(capacity=len(sessions), at_least=True, stopped_by="deadline")
            try:
                # Our own checked socket: websockets then follows no redirect and uses no proxy.
                sock = netguard.create_connection(address, min(per_request, left))
                sock.settimeout(None)  # from here websockets' own timeouts apply
                session = connect(ws_url, sock=sock, open_timeout=min(per_request, left), close_timeout=1,
                                  max_size=_WS_MAX_MESSAGE)
            except netguard.OutboundRefused as exc:
                raise ProbeError(str(exc)) from None
            except (OSError, WebSocketException, TimeoutError, ValueError):
                raise ServerUnreadable(base_url) from None
            sessions.append(session)
            try:
                session.send(json.dumps({"type": "state", "data": {}}))
            except WebSocketException:
                pass  # a full server sends its refusal and closes at once: read it below
            try:
                reply = json.loads(session.recv(timeout=max(0.0, min(per_request, ends - time.monotonic()))))
            except (OSError, WebSocketException, TimeoutError, ValueError):
                if time.monotonic() >= ends and len(sessions) > 1:
                    return CapacityResult(capacity=len(sessions) - 1, at_least=True, stopped_by="deadline")
                raise ServerUnreadable(base_url) from None
            data = reply.get("data") if isinstance(reply, dict) else None
            if isinstance(data, dict) and data.get("code") == "CAPACITY_REACHED":
                return CapacityResult(capacity=len(sessions) - 1, at_least=False)
            # Any other answer, an error about `state` before `reset` included, proves a live session.
        return CapacityResult(capacity=limit, at_least=True, stopped_by="limit")
    finally:
        for session in sessions:
            try:
                session.send(json.dumps({"type": "close", "data": {}}))
                session.close()
            except Exception:  # closing what may already be closed
                pass
