"""The numeric attributes of a finished episode, as its adapter knows them.

Reward terms (worker/training/rewards.py), the evaluations and the composer all read episodes
through here, so a name such as `best_greens` means the same everywhere. Every value is a
finite float (booleans as 0/1); an attribute the adapter does not know is absent rather
than 0, so a term over it can return None instead of a wrong score.

`ATTRIBUTES` lists what each bundled environment exposes (each one's lab spec, keyed like
envs.registry.BUNDLED), for the composer to offer. Nothing here imports Django,
openenv or torch: the web process, the worker and scripts import it alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from envs.registry import SpecTable
from envs.spec import COMMON_ATTRIBUTES

# What every adapter reports (envs/adapters/base.py, ors.py, generic.py).
COMMON: list[tuple[str, str]] = list(COMMON_ATTRIBUTES)

# A harness rollout's outcome (worker/training/harness.py outcome_episode): what TRL's harness
# rollout worker reports of an agent's rollout on a Harbor server. Harbor is a kind of
# environment, not a bundled one, so it has no lab spec.
HARBOR: list[tuple[str, str]] = [
    ("reward", "the verifier's reward (also reward_last, reward_sum, reward_max)"),
    ("solved", "1 if the verifier's reward is above 0"),
    ("won", "the same as solved"),
    ("timed_out", "1 if the agent ran out of time"),
    ("reward_count", "1 when the verifier gave a reward, else 0"),
    ("tool_calls", "tool calls the agent made"),
    ("tool_failures", "tool calls that failed"),
    ("tool_successes", "tool calls that succeeded"),
    ("calls_<tool>", "calls of one tool (e.g. calls_bash)"),
]

# Per environment key (envs.registry.BUNDLED, each spec's `attributes`), then "harbor".
ATTRIBUTES: Mapping[str, list[tuple[str, str]]] = SpecTable(
    lambda spec: list(spec.attributes), extra={"harbor": HARBOR}
)

# Adapter state that is not an attribute of the episode (server identity, limits, wiring).
_SKIPPED = frozenset({"capacity", "batch_size", "base_url", "env_name", "catalog_name", "done"})
_NAME = re.compile(r"[^A-Za-z0-9_]+")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _episode_adapter(adapter: Any) -> Any:
    """The adapter of the episode itself: a router (envs/adapters/router.py) holds one per
    environment and reads through to the current one."""
    if hasattr(type(adapter), "members") and hasattr(adapter, "_current"):
        try:
            return adapter._current()  # noqa: SLF001 - public adapter methods are the model's tools
        except RuntimeError:  # no episode yet
            return adapter
    return adapter


def attribute_name(key: str, prefix: str = "") -> str:
    """`key` as a name an expression can use: letters, digits and underscores."""
    name = _NAME.sub("_", str(key)).strip("_") or "_"
    return f"{prefix}{name}" if prefix else (f"_{name}" if name[0].isdigit() else name)


def episode_components(adapter: Any) -> dict[str, dict[str, float]]:
    """Components the environment reports itself: OpenEnv `metadata["rubric_scores"]`,
    textarena-style `metadata["reward_signals"]` (last step) and ORS per-call rewards."""
    inner = _episode_adapter(adapter)
    metadata = getattr(inner, "_last_metadata", None) or {}
    out: dict[str, dict[str, float]] = {}
    for source in ("rubric_scores", "reward_signals"):
        table = metadata.get(source) if isinstance(metadata, Mapping) else None
        if isinstance(table, Mapping):
            out[source] = {str(k): n for k, v in table.items() if (n := _number(v)) is not None}
    rewards = [n for r in getattr(inner, "rewards", None) or [] if (n := _number(r)) is not None]
    if rewards:
        out["calls"] = {"sum": sum(rewards), "last": rewards[-1], "max": max(rewards)}
    return out


def episode_attributes(adapter: Any) -> dict[str, float]:
    """The numeric attributes of the adapter's (finished) episode: `won`, `reward`, the
    reward history's aggregates, tool counts, every public numeric attribute the adapter
    keeps (num_guesses, best_greens, progress, ...) and every numeric entry of the last
    step's metadata as `meta_<key>`."""
    inner = _episode_adapter(adapter)
    out: dict[str, float] = {}
    state: dict[str, Any] = {}
    for klass in reversed(type(inner).__mro__):  # class constants too (wordle's max_guesses)
        state.update(vars(klass))
    state.update(vars(inner))
    for name, value in state.items():
        if name.startswith("_") or name in _SKIPPED:
            continue
        number = _number(value)
        if number is not None:
            out[name] = number
    if "won" not in out and "solved" in out:
        out["won"] = out["solved"]
    reward = _number(getattr(inner, "reward", None))
    if reward is not None:
        out["reward"] = reward
    rewards = [n for r in getattr(inner, "rewards", None) or [] if (n := _number(r)) is not None]
    out["reward_count"] = float(len(rewards))
    out["reward_sum"] = float(sum(rewards))
    if rewards:
        out["reward_last"] = rewards[-1]
        out["reward_max"] = max(rewards)
    calls = _number(getattr(inner, "tool_calls", 0)) or 0.0
    failures = _number(getattr(inner, "tool_failures", 0)) or 0.0
    out["tool_calls"] = calls
    out["tool_failures"] = failures
    out["tool_successes"] = max(calls - failures, 0.0)
    steps = _number(getattr(inner, "_steps", None))
    out["steps"] = steps if steps is not None else float(len(getattr(inner, "rewards", []) or []))
    out["lost"] = 1.0 if getattr(inner, "lost", False) else 0.0
    counts = getattr(inner, "_tool_counts", None)  # envs/adapters/base.py, per episode
    if isinstance(counts, Mapping):
        for tool, (tool_calls, tool_failures) in counts.items():
            out[attribute_name(tool, "calls_")] = float(tool_calls)
            out[attribute_name(tool, "failures_")] = float(tool_failures)
    metadata = getattr(inner, "_last_metadata", None) or {}
    if isinstance(metadata, Mapping):
        for key, value in metadata.items():
            number = _number(value)
            if number is not None:
                out[attribute_name(key, "meta_")] = number
    return out
