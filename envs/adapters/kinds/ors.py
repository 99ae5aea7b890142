"""What envs know of an Open Reward Standard row: it trains through the ORS adapter, made for
the row's environment on its server (one server may host several) and split, with the Open
Reward key a user's credentials give; its episode reward is the last per-call reward (TRL's
OpenRewardSpec convention). The ORS adapter is imported when a row is bound, not before."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def adapter(environment: Any, *, credentials: Mapping[str, str | None] | None = None) -> type[Any]:
    """The ORS adapter class for the row's environment and split, asking the server now."""
    from envs.adapters.ors import ors_adapter_class

    metadata: Mapping[str, Any] = environment.metadata or {}
    return ors_adapter_class(
        base_url=environment.base_url,
        env_name=str(metadata.get("ors_env") or metadata.get("name") or environment.name),
        split=str(metadata.get("split") or "train"),
        api_key=(credentials or {}).get("api_key"),
        api_key_env=(credentials or {}).get("api_key_env"),
    )


def episode_reward_rule(environment: Any) -> tuple[str, str]:
    return "last", "the last per-call reward of the episode (TRL's OpenRewardSpec convention)"

