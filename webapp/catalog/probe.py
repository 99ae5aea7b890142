"""Reading an environment server over the wire: health, metadata and tool schemas.

Everything a server returns is untrusted: shapes are checked and text is bounded here,
at the edge, before anything is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings

MAX_TEXT = 2000


class ProbeError(Exception):
    """The server could not be read as an environment; the message says why."""


@dataclass
class ProbeResult:
    healthy: bool
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


def _get_json(session: requests.Session, url: str, timeout: float) -> Any:
    try:
        response = session.get(url, timeout=timeout)
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


def _text(value: Any) -> str:
    return str(value)[:MAX_TEXT] if value is not None else ""


def _tools_from_schema(schema: Any, name: str) -> list[dict[str, Any]]:
    """OpenEnv `/schema` describes the action model; a classic environment has one tool."""
    if not isinstance(schema, dict) or not isinstance(schema.get("action"), dict):
        raise ProbeError("/schema has no 'action' object: not an OpenEnv server")
    action = schema["action"]
    properties = action.get("properties") if isinstance(action.get("properties"), dict) else {}
    parameters = {
        "type": "object",
        "properties": {
            str(key)[:100]: {
                "type": _text(prop.get("type", "string"))[:20] if isinstance(prop, dict) else "string",
                "description": _text(prop.get("description", "")) if isinstance(prop, dict) else "",
            }
            for key, prop in list(properties.items())[:50]
            if key != "metadata"
        },
        "required": [str(r)[:100] for r in action.get("required", []) if isinstance(r, str)][:50],
    }
    return [
        {
            "name": name,
            "description": _text(action.get("description") or action.get("title") or ""),
            "parameters": parameters,
        }
    ]


def probe_openenv(base_url: str, *, timeout: float | None = None) -> ProbeResult:
    """Read `/health`, `/metadata` and `/schema`. Raises ProbeError when it is no environment."""
    timeout = settings.ENVLAB_PROBE_TIMEOUT if timeout is None else timeout
    base_url = normalise_base_url(base_url)
    with requests.Session() as session:
        health = _get_json(session, f"{base_url}/health", timeout)
        if not isinstance(health, dict) or "status" not in health:
            raise ProbeError("/health did not return a status: not an OpenEnv server")
        metadata_raw = _get_json(session, f"{base_url}/metadata", timeout)
        if not isinstance(metadata_raw, dict):
            raise ProbeError("/metadata is not a JSON object")
        schema = _get_json(session, f"{base_url}/schema", timeout)
    metadata = {
        key: _text(metadata_raw.get(key))
        for key in ("name", "description", "version", "author")
        if metadata_raw.get(key) is not None
    }
    from webapp.catalog.adapters import tool_name_for  # the one registry of adapters

    tools = _tools_from_schema(schema, tool_name_for(metadata.get("name", "")))
    healthy = str(health.get("status")).lower() in ("healthy", "ok")
    return ProbeResult(
        healthy=healthy, metadata=metadata, tools=tools,
        error="" if healthy else f"/health reports {_text(health.get('status'))}",
    )
