"""What a probe finds, and what a server says of its tools cut down to what the catalog
shows. Below probe.py and each kind's reader (harbor.py), which both build these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_TEXT = 2000
MAX_TOOLS = 64


@dataclass
class ProbeResult:
    healthy: bool
    kind: str = "openenv"
    metadata: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


def clip_text(value: Any, limit: int = MAX_TEXT) -> str:
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
            "type": clip_text(prop.get("type", "string"), 40) if not isinstance(prop.get("type"), list)
            else [clip_text(t, 20) for t in prop["type"][:5]],
            "description": clip_text(prop.get("description", "")),
        }
        if isinstance(prop.get("enum"), list):
            entry["enum"] = [v for v in prop["enum"][:50] if isinstance(v, str | int | float | bool)]
        out[clip_text(key, 100)] = entry
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    return {
        "type": "object",
        "properties": out,
        "required": [clip_text(r, 100) for r in required if isinstance(r, str)][:50],
    }
