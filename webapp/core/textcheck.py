"""Input that no database stores: PostgreSQL refuses the NUL character in text and in JSON
(jsonb), so a request holding one would fail at the write, after its checks, as a 500. The
edges that take JSON (run configs, evaluations, recipes, dry runs) refuse it up front, naming
where it is."""

from __future__ import annotations

from typing import Any

MESSAGE = "text cannot hold NUL characters (\\u0000)"


def nul_path(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string (or key) holding a NUL in `value`, else None."""
    if isinstance(value, str):
        return (path or "non_field_errors") if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and "\x00" in key:
                return path or "non_field_errors"
            found = nul_path(item, where)
            if found:
                return found
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = nul_path(item, f"{path}.{index}" if path else str(index))
            if found:
                return found
    return None


def nul_errors(value: Any) -> dict[str, list[str]]:
    """{path: [message]} for the first NUL in `value`, or {}."""
    where = nul_path(value)
    return {where: [MESSAGE]} if where else {}


def json_object_errors(data: Any) -> dict[str, list[str]]:
    """What a JSON edge refuses before its own checks: anything but an object, or an object
    holding a NUL ({path: [message]}); {} for one it may read on."""
    if not isinstance(data, dict):
        return {"non_field_errors": ["expected a JSON object"]}
    return nul_errors(data)
