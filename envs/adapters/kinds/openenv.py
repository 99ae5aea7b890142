"""What envs know of an OpenEnv environment row: the adapter a run binds to it (the bundled
server's own where registration found that server itself, never by name; otherwise one
generated from what the server describes, classic `/schema` or MCP tools), how its episode
reward is made (that adapter's rule). The generic adapters are imported when a row is bound, not before: the
web process reads the reward rule without them."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from envs.registry import MARKER_PATH, AdapterSpec, bundled_match, recorded_adapter


def bundled_adapter_class(spec: AdapterSpec) -> type[Any]:
    """The class a bundled adapter spec names by dotted path, imported now."""
    module_name, _, class_name = spec.adapter_path.rpartition(".")
    return getattr(importlib.import_module(module_name), class_name)


def adapter(environment: Any, *, credentials: Mapping[str, str | None] | None = None) -> type[Any]:
    """The unbound adapter class for an OpenEnv row (`credentials` are ORS's: unused here)."""
    metadata: Mapping[str, Any] = environment.metadata or {}
    spec = recorded_adapter(metadata)
    if spec is not None:
        return bundled_adapter_class(spec)
    from envs.adapters import generic

    style = metadata.get("style")
    schema: dict[str, Any] | None = None
    if style not in ("mcp", "classic"):
        # No decision stored (a row from before it was): ask the server what it is, as
        # registration does; its reported name decides nothing.
        spec, schema = _bundled_on_server(environment.base_url)
        if spec is not None:
            return bundled_adapter_class(spec)
        style = generic.detect_openenv_style(environment.base_url)
    if style == "mcp":
        tools = generic.list_mcp_tools(environment.base_url)
        return generic.mcp_adapter_class(base_url=environment.base_url, env_name=environment.name, tools=tools)
    schema = schema or generic.fetch_schema(environment.base_url)
    return generic.classic_adapter_class(
        base_url=environment.base_url, env_name=environment.name, schema=schema,
        description=str(metadata.get("description", "")),
    )


def _bundled_on_server(base_url: str) -> tuple[AdapterSpec | None, dict[str, Any]]:
    """The bundled adapter if the server at `base_url` is that bundled server (its marker and
    its `/schema` action, `bundled_match`), and the schema it served.

    Raises ConnectionError (unreachable) or ValueError (not an OpenEnv server), as the
    generic adapters' reads do.
    """
    from envs.adapters import generic

    schema = generic.fetch_schema(base_url)
    try:
        marker = generic.request_json(
            f"{generic.http_base(base_url)}{MARKER_PATH}", timeout=generic.DEFAULT_TIMEOUT_S
        )
    except ValueError:  # no marker (HTTP 404 and the like): not one of the bundled servers
        marker = None
    return bundled_match(marker, schema), schema


def episode_reward_rule(environment: Any) -> tuple[str, str]:
    """The recorded bundled adapter's rule, else the generic adapters' (OpenEnvAdapter's)."""
    from envs.adapters.base import EPISODE_REWARD_RULES, OpenEnvAdapter

    spec = recorded_adapter(environment.metadata or {})
    rule = str(bundled_adapter_class(spec).episode_reward) if spec is not None else OpenEnvAdapter.episode_reward
    return rule, EPISODE_REWARD_RULES[rule]

