"""Reading an environment server over the wire: kind, health, metadata, tools, capacity.

Everything a server returns is untrusted: shapes are checked and text is bounded here,
at the edge, before anything is stored. Every call has a timeout, so a slow or silent
server gives a clear error within ENVLAB_PROBE_TIMEOUT seconds per request.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import requests
from django.conf import settings

MAX_TEXT = 2000
MAX_TOOLS = 64


class ProbeError(Exception):
    """The server could not be read as an environment; the message says why."""


@dataclass
class ProbeResult:
    healthy: bool
    kind: str = "openenv"
    metadata: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


def normalise_base_url(url: str) -> str:
    url = (url or "").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ProbeError("base_url must be an http:// or https:// URL with a host")
    if parts.query or parts.fragment:
        raise ProbeError("base_url must not carry a query or fragment")
    return url.rstrip("/")


def _timeout(timeout: float | None) -> float:
    return float(settings.ENVLAB_PROBE_TIMEOUT if timeout is None else timeout)


def _request(session: requests.Session, method: str, url: str, timeout: float, **kwargs: Any) -> Any:
    try:
        response = session.request(method, url, timeout=timeout, **kwargs)
    except requests.Timeout:
        raise ProbeError(f"{url} did not answer within {timeout:g} s") from None
    except requests.ConnectionError:
        raise ProbeError(f"cannot connect to {url}: is the server running?") from None
    except requests.RequestException as exc:
        raise ProbeError(f"request to {url} failed: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise ProbeError(f"{url} answered HTTP {response.status_code}, not an environment server")
    try:
        return response.json()
    except ValueError:
        raise ProbeError(f"{url} did not return JSON: not an environment server") from None


def _session() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # environment servers are reached directly, never through a proxy
    return session


def _health(session: requests.Session, base_url: str, timeout: float) -> dict[str, Any]:
    health = _request(session, "GET", f"{base_url}/health", timeout)
    if not isinstance(health, dict) or "status" not in health:
        raise ProbeError("/health did not return a status: not an environment server")
    return health


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    return str(value)[:limit] if value is not None else ""


def clean_parameters(schema: Any) -> dict[str, Any]:
    """A JSON-schema object of tool arguments, reduced to what the catalog shows."""
    schema = schema if isinstance(schema, dict) else {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    out: dict[str, Any] = {}
    for key, prop in list(properties.items())[:50]:
        if key == "metadata":
            continue
        prop = prop if isinstance(prop, dict) else {}
        entry: dict[str, Any] = {
            "type": _text(prop.get("type", "string"), 40) if not isinstance(prop.get("type"), list)
            else [_text(t, 20) for t in prop["type"][:5]],
            "description": _text(prop.get("description", "")),
        }
        if isinstance(prop.get("enum"), list):
            entry["enum"] = [v for v in prop["enum"][:50] if isinstance(v, str | int | float | bool)]
        out[_text(key, 100)] = entry
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    return {
        "type": "object",
        "properties": out,
        "required": [_text(r, 100) for r in required if isinstance(r, str)][:50],
    }


def _tool(name: Any, description: Any, parameters: Any) -> dict[str, Any]:
    return {"name": _text(name, 100), "description": _text(description), "parameters": clean_parameters(parameters)}


# --- OpenEnv -------------------------------------------------------------------------------


def _mcp_tools(session: requests.Session, base_url: str, timeout: float) -> list[dict[str, Any]]:
    """Raw tools of an MCP-style OpenEnv server (JSON-RPC `tools/list` on /mcp); [] for a classic one."""
    try:
        answer = _request(
            session, "POST", f"{base_url}/mcp", timeout,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        )
    except ProbeError:
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
    them (worker.adapters.generic imports no openenv at module level: cheap here)."""
    from webapp.catalog.toolschema import describe_tools
    from worker.adapters import generic

    name = metadata.get("name") or "environment"
    try:
        if mcp_tools:
            cls = generic.mcp_adapter_class(base_url=base_url, env_name=name, tools=mcp_tools)
        else:
            cls = generic.classic_adapter_class(
                base_url=base_url, env_name=name, schema=schema, description=metadata.get("description", "")
            )
    except (ValueError, TypeError) as exc:
        raise ProbeError(f"the server's tools cannot be offered to a model: {_text(exc, 300)}") from None
    return [_tool(t["name"], t["description"], t["parameters"]) for t in describe_tools(cls)][:MAX_TOOLS]


def _bundled_tools(metadata_name: str) -> list[dict[str, Any]] | None:
    from webapp.catalog.adapters import adapter_for  # the one registry of adapters

    spec = adapter_for(metadata_name)
    if spec is None:
        return None
    import importlib

    from webapp.catalog.toolschema import describe_tools

    module_name, _, class_name = spec.adapter_path.rpartition(".")
    # Adapter modules import openenv lazily, so this import is cheap (no torch, no openenv).
    return describe_tools(getattr(importlib.import_module(module_name), class_name))


def probe_openenv(base_url: str, *, timeout: float | None = None) -> ProbeResult:
    """Read `/health`, `/metadata`, `/schema` (and `/mcp` tools). ProbeError when it is no OpenEnv server."""
    timeout = _timeout(timeout)
    base_url = normalise_base_url(base_url)
    with _session() as session:
        health = _health(session, base_url, timeout)
        schema = _request(session, "GET", f"{base_url}/schema", timeout)
        if not isinstance(schema, dict) or not isinstance(schema.get("action"), dict):
            raise ProbeError("/schema has no 'action' object: not an OpenEnv server")
        metadata_raw = _request(session, "GET", f"{base_url}/metadata", timeout)
        if not isinstance(metadata_raw, dict):
            raise ProbeError("/metadata is not a JSON object")
        metadata = {
            key: _text(metadata_raw.get(key))
            for key in ("name", "description", "version", "author")
            if metadata_raw.get(key) is not None
        }
        tools = _bundled_tools(metadata.get("name", ""))
        if tools is not None:
            metadata["style"] = "bundled"
        else:
            mcp_tools = _mcp_tools(session, base_url, timeout)
            metadata["style"] = "mcp" if mcp_tools else "classic"
            tools = _generated_tools(base_url, metadata, schema, mcp_tools)
    healthy = str(health.get("status")).lower() in ("healthy", "ok")
    return ProbeResult(
        healthy=healthy, kind="openenv", metadata=metadata, tools=tools,
        error="" if healthy else f"/health reports {_text(health.get('status'))}",
    )


# --- Open Reward Standard ------------------------------------------------------------------


def ors_environments(base_url: str, *, timeout: float | None = None) -> list[str]:
    """The environment names an ORS server hosts. ProbeError when it is no ORS server."""
    timeout = _timeout(timeout)
    base_url = normalise_base_url(base_url)
    with _session() as session:
        _health(session, base_url, timeout)
        names = _request(session, "GET", f"{base_url}/list_environments", timeout)
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ProbeError("/list_environments did not return environment names: not an ORS server")
    return [_text(n, 100) for n in names[:100]]


def probe_ors(
    base_url: str, *, env_name: str, timeout: float | None = None, names: list[str] | None = None
) -> ProbeResult:
    """Read one ORS environment: tools, splits and task counts (`names`: the server's
    environments, when the caller has just listed them)."""
    timeout = _timeout(timeout)
    base_url = normalise_base_url(base_url)
    names = names if names is not None else ors_environments(base_url, timeout=timeout)
    if env_name not in names:
        raise ProbeError(f"the server hosts {', '.join(names)}; no environment named '{env_name}'")
    prefix = f"{base_url}/{quote(env_name, safe='')}"
    with _session() as session:
        listed = _request(session, "GET", f"{prefix}/tools", timeout)
        raw_splits = _request(session, "GET", f"{prefix}/splits", timeout)
        tools_raw = listed.get("tools") if isinstance(listed, dict) else None
        if not isinstance(tools_raw, list) or not isinstance(raw_splits, list):
            raise ProbeError(f"{prefix}/tools or /splits is not in the Open Reward Standard shape")
        splits: dict[str, int | None] = {}
        for split in raw_splits[:20]:
            name = split.get("name") if isinstance(split, dict) else split
            if not isinstance(name, str):
                continue
            try:
                count = _request(session, "POST", f"{prefix}/num_tasks", timeout, json={"split": name})
                splits[_text(name, 64)] = int(count["num_tasks"])
            except (ProbeError, KeyError, TypeError, ValueError):
                splits[_text(name, 64)] = None
    tools = [
        _tool(t.get("name"), t.get("description"), t.get("input_schema"))
        for t in tools_raw[:MAX_TOOLS]
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]
    return ProbeResult(
        healthy=True, kind="ors", tools=tools,
        metadata={"name": _text(env_name, 100), "ors_env": _text(env_name, 100), "splits": splits,
                  "environments": names},
    )


def probe_environment(
    base_url: str, *, kind: str | None = None, ors_env: str = "", timeout: float | None = None
) -> ProbeResult:
    """Probe by kind, or detect it: an OpenEnv server answers `/schema`; an ORS one `/list_environments`."""
    if kind == "openenv":
        return probe_openenv(base_url, timeout=timeout)
    if kind == "ors":
        return _probe_ors_choosing(base_url, ors_env, timeout)
    if kind not in (None, ""):
        raise ProbeError(f"kind '{kind}' cannot be probed over HTTP")
    started = time.monotonic()
    try:
        return probe_openenv(base_url, timeout=timeout)
    except ProbeError as openenv_error:
        if "cannot connect" in str(openenv_error) or "did not answer" in str(openenv_error):
            raise  # down or slow: asking again under another name only doubles the wait
        try:
            remaining = max(1.0, _timeout(timeout) - (time.monotonic() - started))
            return _probe_ors_choosing(base_url, ors_env, remaining)
        except ProbeError as ors_error:
            raise ProbeError(
                f"not an OpenEnv server ({openenv_error}) nor an Open Reward Standard server ({ors_error})"
            ) from None


def _probe_ors_choosing(base_url: str, ors_env: str, timeout: float | None) -> ProbeResult:
    """Probe `ors_env`, or the server's only environment; several and none chosen is an error."""
    names = ors_environments(base_url, timeout=timeout)
    if not ors_env and len(names) > 1:
        raise ProbeError(f"the server hosts several environments ({', '.join(names)}): choose one (ors_env)")
    return probe_ors(base_url, env_name=ors_env or names[0], timeout=timeout, names=names)


# --- capacity -----------------------------------------------------------------------------


@dataclass
class CapacityResult:
    capacity: int
    at_least: bool  # the probe stopped at its limit before the server refused


def probe_capacity(base_url: str, *, limit: int = 256, timeout: float | None = None) -> CapacityResult:
    """Open WebSocket sessions on `/ws` until the server answers CAPACITY_REACHED, then close them all.

    OpenEnv servers do not report their capacity; this measures it. Each session is a
    real environment instance on the server (no episode is started: a `state` request
    proves the session). Sessions held by running trainings count against it.
    """
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    timeout = _timeout(timeout)
    ws_url = normalise_base_url(base_url).replace("https://", "wss://", 1).replace("http://", "ws://", 1) + "/ws"
    sockets = []
    try:
        while len(sockets) < limit:
            try:
                socket = connect(ws_url, open_timeout=timeout, close_timeout=1)
            except (OSError, WebSocketException, TimeoutError) as exc:
                raise ProbeError(f"cannot open a session on {ws_url}: {type(exc).__name__}") from None
            sockets.append(socket)
            try:
                socket.send(json.dumps({"type": "state", "data": {}}))
            except WebSocketException:
                pass  # a full server sends its refusal and closes at once: read it below
            try:
                reply = json.loads(socket.recv(timeout=timeout))
            except (OSError, WebSocketException, TimeoutError, ValueError) as exc:
                raise ProbeError(f"session {len(sockets)} on {ws_url} gave no answer: {type(exc).__name__}") from None
            data = reply.get("data") if isinstance(reply, dict) else None
            if isinstance(data, dict) and data.get("code") == "CAPACITY_REACHED":
                return CapacityResult(capacity=len(sockets) - 1, at_least=False)
            # Any other answer, an error about `state` before `reset` included, proves a live session.
        return CapacityResult(capacity=limit, at_least=True)
    finally:
        for socket in sockets:
            try:
                socket.send(json.dumps({"type": "close", "data": {}}))
                socket.close()
            except Exception:  # noqa: S110 - closing what may already be closed
                pass
