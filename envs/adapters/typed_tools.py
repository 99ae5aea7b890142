"""JSON Schema to typed Python methods, for every adapter generated at run time.

TRL describes a tool to the model from the method's name, signature, type hints and
Google-style docstring (`transformers.utils.get_json_schema`). The generic OpenEnv
adapters (an action's `/schema`, an MCP server's `tools/list`) and the ORS adapter
(`ToolSpec.input_schema`) all build their methods here: closures with a real
`__signature__`, `__annotations__` and docstring; nothing is `eval`-ed or `exec`-ed.
"""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, Optional, Union

SCALAR_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}

def resolve_ref(prop: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, Mapping):
            return {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
    return prop

def python_type(prop: Mapping[str, Any], defs: Mapping[str, Any], depth: int = 0) -> Any:
    if depth > 8:  # a recursive schema: describe the rest as anything
        return Any
    prop = resolve_ref(prop, defs)
    values: list[Any] = []
    if isinstance(prop.get("enum"), list):
        values = prop["enum"]
    elif "const" in prop:
        values = [prop["const"]]
    if values and all(v is None or isinstance(v, str | int | float | bool) for v in values):
        return Literal.__getitem__(tuple(values))
    union = prop.get("anyOf") or prop.get("oneOf")
    json_type = prop.get("type")
    if isinstance(json_type, list):
        union = [{**prop, "type": t} for t in json_type]
    if isinstance(union, list) and union:
        members = [m for m in union if not (isinstance(m, Mapping) and m.get("type") == "null")]
        types = list(
            dict.fromkeys(
                python_type(m, defs, depth + 1) for m in members if isinstance(m, Mapping)
            )
        )
        if not types:
            return type(None)
        merged = types[0] if len(types) == 1 else Union.__getitem__(tuple(types))
        return Optional[merged] if len(members) < len(union) else merged  # noqa: UP045
    if json_type in SCALAR_TYPES:
        return SCALAR_TYPES[json_type]
    if json_type == "array":
        items = prop.get("items")
        return (
            list.__class_getitem__(python_type(items, defs, depth + 1))
            if isinstance(items, Mapping) and items
            else list
        )
    if json_type == "object":
        return dict[str, Any]
    if json_type == "null":
        return type(None)
    return Any

def typed_parameters(
    properties: Mapping[str, Any],
    required: set[str],
    defs: Mapping[str, Any],
    *,
    exact_names: str | None = None,
) -> tuple[list[inspect.Parameter], dict[str, str], list[tuple[str, str]]]:
    """Parameters typed from a JSON schema's `properties`, their wire names, their docs.

    By default names are mended into identifiers (`max-len` -> `max_len`, sent back under
    the wire name) and the parameters are keyword-only, so defaults may come in any order.
    With `exact_names` (a label for errors, such as "ORS tool 'move'") the server's own
    names are kept, positional-or-keyword with the required ones first, and a name that
    cannot be a Python parameter is a ValueError.
    """
    if exact_names is not None:
        properties = {
            **{k: v for k, v in properties.items() if k in required},
            **{k: v for k, v in properties.items() if k not in required},
        }
    kind = inspect.Parameter.KEYWORD_ONLY if exact_names is None else inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters: list[inspect.Parameter] = []
    wire_names: dict[str, str] = {}
    docs: list[tuple[str, str]] = []
    for wire_name, prop in properties.items():
        if not isinstance(prop, Mapping):
            raise ValueError(f"property {wire_name!r} has a malformed schema")
        if exact_names is None:
            name = unique(identifier(wire_name, fallback="arg"), {"self", *wire_names})
        elif not wire_name.isidentifier() or keyword.iskeyword(wire_name) or wire_name == "self":
            raise ValueError(f"{exact_names}: argument name {wire_name!r} cannot be a Python parameter")
        else:
            name = wire_name
        annotation = python_type(prop, defs)
        if wire_name in required:
            default: Any = inspect.Parameter.empty
        else:
            default = prop.get("default")
            if default is None:
                annotation = Optional[annotation]  # noqa: UP045 (works for Literal and Any too)
        parameters.append(
            inspect.Parameter(
                name, kind, default=default, annotation=annotation
            )
        )
        wire_names[name] = wire_name
        resolved = resolve_ref(prop, defs)
        text = resolved.get("description") or resolved.get("title") or wire_name
        docs.append((name, one_line(str(text))))
    return parameters, wire_names, docs

def make_tool(
    name: str,
    qualname: str,
    doc: str,
    parameters: list[inspect.Parameter],
    call: Callable[[Any, dict[str, Any]], str],
) -> Callable[..., str]:
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    signature = inspect.Signature([self_parameter, *parameters], return_annotation=str)

    def tool(self: Any, *args: Any, **kwargs: Any) -> str:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as exc:  # the model named an argument that does not exist, or left one out
            self.tool_calls += 1
            self.tool_failures += 1
            raise TypeError(f"{name}: {exc}") from None
        # Only what the model gave: the server applies its own defaults.
        return call(self, {key: value for key, value in bound.arguments.items() if key != "self"})

    tool.__name__ = name
    tool.__qualname__ = qualname
    tool.__doc__ = doc
    tool.__signature__ = signature  # type: ignore[attr-defined]  # read by inspect (and TRL's schema), unknown to typeshed
    tool.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": str}
    return tool

def docstring(summary: str, args: list[tuple[str, str]], returns: str) -> str:
    lines = [summary]
    if args:
        lines += ["", "Args:", *(f"    {name}: {text}" for name, text in args)]
    return "\n".join([*lines, "", "Returns:", f"    {returns}"])

def one_line(text: str) -> str:
    """Docstring-safe text: one line, no section header or ``(choices: ...)`` for TRL to misparse."""
    text = " ".join(text.split())
    text = re.sub(r"\b(Args|Returns|Raises)\s*:", r"\1 -", text)
    return re.sub(r"\(choices\s*:", "(choices -", text, flags=re.IGNORECASE)

def identifier(raw: str, *, fallback: str) -> str:
    """A public Python identifier (ASCII) from any name: TRL hides names starting with ``_``."""
    text = re.sub(r"_+", "_", re.sub(r"[^0-9A-Za-z_]", "_", raw)).strip("_")
    if not text:
        return fallback
    if text[0].isdigit():
        text = f"{fallback}_{text}"
    return f"{text}_" if keyword.iskeyword(text) else text

def unique(name: str, taken: Mapping[str, Any] | set[str]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    return candidate
