"""Environment adapters: what TRL's `environment_factory` gets for each environment.

`bind_adapter` picks the adapter of one registered environment: a bundled one where
registration found the bundled server itself (its stored `metadata["adapter"]`; see
envs.registry, the one registry), never by name; Open Reward Standard environments
through the ORS adapter, and any other OpenEnv server through an adapter generated from
what it describes (classic `/schema` or MCP tools); each kind's module in envs/adapters/kinds
makes that choice for its rows. The class it returns takes no
constructor arguments and knows its server, its name within the run and, for error
messages, the capacity and the generation batch size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.adapters.kinds import kind_module, openenv
from envs.registry import adapter_for


def base_adapter(environment: Any, *, credentials: Mapping[str, str | None] | None = None) -> type[Any]:
    """The unbound adapter class for a catalog `Environment` row (or anything shaped like it),
    as its kind's module (envs.adapters.kinds) binds it.

    `credentials`: the Open Reward key arguments (`api_key`, `api_key_env`) an ORS environment
    may use, as webapp.catalog.credentials.ors_credentials decides them for a user; none by default.
    """
    kind = kind_module(environment.kind)
    if kind is None:
        raise ValueError(f"environments of kind '{environment.kind}' cannot be trained on with GRPO here")
    return kind.adapter(environment, credentials=credentials)


def episode_reward_rule(environment: Any) -> tuple[str, str]:
    """How the episode reward (the `env_reward` term's default `result`) is made for a catalog
    `Environment` row: its rule ("sum", "last", "max"; "verifier" for Harbor) and a sentence.
    Read from the row alone: the server is not asked. (A kind envs do not know is read as an
    OpenEnv row, as it always was.)"""
    return (kind_module(environment.kind) or openenv).episode_reward_rule(environment)


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
    base = openenv.bundled_adapter_class(spec)
    return type(base.__name__, (base,), {"base_url": base_url, "env_name": env_name, "catalog_name": env_name})
