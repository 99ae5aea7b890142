"""Describe an adapter's tools the way the model sees them, without importing transformers.

TRL builds each tool's JSON schema from the method's type hints and its Google-style
docstring (`Args:` section). The catalog shows the same three things: name, description
and typed parameters. (The web process must not import torch/transformers, hence this
small reader instead of `transformers.utils.get_json_schema`.)
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}
_ARG_LINE = re.compile(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def _json_type(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        values = list(typing.get_args(hint))
        base = _json_type(type(values[0])) if values else {"type": "string"}
        return {**base, "enum": values}
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _json_type(options[0]) if len(options) == 1 else {"type": [_json_type(a)["type"] for a in options]}
    if origin in (list, tuple):
        args = typing.get_args(hint)
        return {"type": "array", **({"items": _json_type(args[0])} if args else {})}
    return {"type": _JSON_TYPES.get(hint, "string")}


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph(s) and the `Args:` entries of a Google-style docstring."""
    description: list[str] = []
    args: dict[str, str] = {}
    section = "description"
    arg_indent: int | None = None
    current = ""
    for line in inspect.cleandoc(doc or "").splitlines():
        stripped = line.strip()
        if re.fullmatch(r"(Args|Arguments|Parameters):", stripped):
            section, arg_indent = "args", None
            continue
        if re.fullmatch(r"[A-Z][a-z]+( [a-z]+)?:", stripped):
            section = "other"
            continue
        if section == "description":
            description.append(stripped)
            continue
        if section != "args" or not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        arg_indent = indent if arg_indent is None else arg_indent
        match = _ARG_LINE.match(stripped)
        if indent == arg_indent and match:
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif current:
            args[current] = f"{args[current]} {stripped}".strip()
    return " ".join(x for x in description if x).strip(), args


def describe_tool(func: Any) -> dict[str, Any]:
    description, arg_docs = _docstring_parts(func.__doc__ or "")
    hints = typing.get_type_hints(func)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, parameter in inspect.signature(func).parameters.items():
        if name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        properties[name] = {**_json_type(hints.get(name, str)), "description": arg_docs.get(name, "")}
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
    return {
        "name": func.__name__,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }


def describe_tools(cls: type) -> list[dict[str, Any]]:
    """Every public method other than `reset` and `get_reward`, as TRL offers them."""
    return [
        describe_tool(member)
        for name, member in inspect.getmembers(cls, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    ]
