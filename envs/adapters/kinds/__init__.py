"""The kinds of environment row envs can bind, one module each (openenv, ors, harbor), by the
row's `kind`: its adapter and its episode reward rule. `base_adapter` and `episode_reward_rule`
(envs.adapters) look the kind up here instead of branching on its name. The lab's own
description of each kind (probing, launch checks) is webapp/catalog/kinds, which envs cannot
import. Whether a row's server reads MAX_CONCURRENT_ENVS stays in envs.capacity: envs.adapters
imports envs.capacity, so envs.capacity cannot import this package (no circles in envs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from envs.adapters.kinds import harbor, openenv, ors


class RowKind(Protocol):
    """What each kind's module answers for a catalog row of that kind."""

    def adapter(self, environment: Any, *, credentials: Mapping[str, str | None] | None = None) -> type[Any]: ...

    def episode_reward_rule(self, environment: Any) -> tuple[str, str]: ...


KINDS: dict[str, RowKind] = {"openenv": openenv, "ors": ors, "harbor": harbor}


def kind_module(name: str) -> RowKind | None:
    """The module of the kind named `name` (a row's `kind`), or None for one envs do not know."""
    return KINDS.get(name)
