"""Environment adapters: what TRL's `environment_factory` gets for each environment.

`bind_adapter` picks the adapter of one registered environment: a bundled one where
registration found the bundled server itself (its stored `metadata["adapter"]`; see
envs.registry, the one registry), never by name; Open Reward Standard environments
through the ORS adapter, and any other OpenEnv server through an adapter generated from
what it describes (classic `/schema` or MCP tools). The class it returns takes no
constructor arguments and knows its server, its name within the run and, for error
messages, the capacity and the generation batch size.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from envs.registry import (
    MARKER_PATH,
    AdapterSpec,
    adapter_for,
    bundled_match,
    recorded_adapter,
)


def _load(dotted: str) -> type[Any]:
    module_name, _, class_name = dotted.rpartition(".")
    return getattr(importlib.import_module(module_name), class_name)


def base_adapter(environment: Any, *, credentials: Mapping[str, str | None] | None = None) -> type[Any]:
    """The unbound adapter class for a catalog `Environment` row (or anything shaped like it).

    `credentials`: the Open Reward key arguments (`api_key`, `api_key_env`) an ORS environment
    may use, as webapp.catalog.credentials.ors_credentials decides them for a user; none by default.
    """
    metadata: Mapping[str, Any] = environment.metadata or {}
    if environment.kind == "ors":
        from envs.adapters.ors import ors_adapter_class

        return ors_adapter_class(
            base_url=environment.base_url,
            env_name=str(metadata.get("ors_env") or metadata.get("name") or environment.name),
            split=str(metadata.get("split") or "train"),
            api_key=(credentials or {}).get("api_key"),
            api_key_env=(credentials or {}).get("api_key_env"),
        )
    if environment.kind != "openenv":
        raise ValueError(f"environments of kind '{environment.kind}' cannot be trained on with GRPO here")
    spec = recorded_adapter(metadata)
    if spec is not None:
        return _load(spec.adapter_path)
    from envs.adapters import generic

    style = metadata.get("style")
    schema: dict[str, Any] | None = None
    if style not in ("mcp", "classic"):
        # No decision stored (a row from before it was): ask the server what it is, as
        # registration does; its reported name decides nothing.
        spec, schema = _bundled_on_server(environment.base_url)
        if spec is not None:
            return _load(spec.adapter_path)
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


# What `env_reward` means where the episode is not played by an OpenEnvAdapter.
_OTHER_KIND_REWARDS = {
    "ors": ("last", "the last per-call reward of the episode (TRL's OpenRewardSpec convention)"),
    "harbor": ("verifier", "the verifier's reward for the agent's rollout"),
}


def episode_reward_rule(environment: Any) -> tuple[str, str]:
    """How the episode reward (the `env_reward` term's default `result`) is made for a catalog
    `Environment` row: its rule ("sum", "last", "max"; "verifier" for Harbor) and a sentence.
    Read from the row alone: the server is not asked."""
    from envs.adapters.base import EPISODE_REWARD_RULES, OpenEnvAdapter

    other = _OTHER_KIND_REWARDS.get(environment.kind)
    if other is not None:
        return other
    spec = recorded_adapter(environment.metadata or {})
    rule = str(_load(spec.adapter_path).episode_reward) if spec is not None else OpenEnvAdapter.episode_reward
    return rule, EPISODE_REWARD_RULES[rule]


def bind_adapter(
    *,
    environment: Any,
    env_name: str,
    batch_size: int | None = None,
    credentials: Mapping[str, str | None] | None = None,
) -> type[Any]:
    """A no-argument-constructible subclass of the environment's adapter, bound to its server."""
    base = base_adapter(environment, credentials=credentials)
    return type(
        base.__name__,
        (base,),
        {
            "base_url": environment.base_url,
            "env_name": env_name,
            "catalog_name": environment.name,
            "capacity": environment.capacity,
            "batch_size": batch_size,
        },
    )


def adapter_class(*, metadata_name: str, base_url: str, env_name: str) -> type[Any]:
    """A bundled OpenEnv adapter by its metadata name, bound to one server (tests, bench)."""
    spec = adapter_for(metadata_name)
    if spec is None:
        raise ValueError(f"no training adapter for environment '{metadata_name}'")
    base = _load(spec.adapter_path)
    return type(base.__name__, (base,), {"base_url": base_url, "env_name": env_name, "catalog_name": env_name})
