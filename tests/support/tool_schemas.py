"""The JSON schema transformers' get_json_schema gives an adapter's tool (what TRL shows the
model), built from what differs between tools, so a test spells out only its own."""

from __future__ import annotations

from typing import Any


def tool_schema(
    name: str,
    description: str,
    properties: dict[str, Any],
    *,
    returns: str,
    required: list[str] | None = None,
) -> dict[str, Any]:
    """A tool `name` whose arguments are `properties` (an object schema; a tool without required
    arguments has no "required" key) and whose result is a string described by `returns`."""
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        parameters["required"] = required
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": parameters,
            "return": {"type": "string", "description": returns},
        },
    }
