"""How each reward term kind scores one episode, and how a tree of terms combines.

Pure Python over plain values (an `Episode`), so the worker's TRL reward functions
(worker/training/rewards.py), a dry run and a preview in the web process all score alike.

`None` means "not applicable here": a term limited to other environments, an attribute
the episode lacks, an unscored (lost) rollout. TRL skips a None in its weighted sum
(nansum); containers follow the same rule: `weighted_sum` and `sequential` skip None
children, `gate` of None is None, and a container whose children are all None is None.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webapp.rewards.expressions import ExpressionError, ExpressionUnscored, expression_evaluate
from webapp.rewards.terms import RewardTerm

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Episode:
    env_name: str = ""
    attributes: Mapping[str, float] = field(default_factory=dict)
    components: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    completion_tokens: int | None = None
    completion_chars: int | None = None
    lost: bool = False


def episode_from_adapter(
    adapter: Any, *, completion_ids: Any = None, completion: Any = None
) -> Episode:
    """An episode as reward terms see it, read from the adapter TRL played it on."""
    from envs.adapters.attributes import episode_attributes, episode_components

    chars = _completion_chars(completion)
    return Episode(
        env_name=str(getattr(adapter, "env_name", "") or ""),
        attributes=episode_attributes(adapter),
        components=episode_components(adapter),
        completion_tokens=len(completion_ids) if completion_ids is not None else None,
        completion_chars=chars,
        lost=bool(getattr(adapter, "lost", False)),
    )


def episode_from_stored(env: str, facts: Mapping[str, Any], lost: bool) -> Episode:
    """An episode as reward terms see it, read back from a stored rollout's `episode` facts
    (webapp.runs.telemetry.record keeps them: attributes, components, completion sizes), so a
    preview or a re-score scores exactly what the run's terms scored. Anything that is not
    a finite number is left out, as an attribute the adapter did not know."""
    facts = facts if isinstance(facts, Mapping) else {}
    attributes = facts.get("attributes")
    components = facts.get("components")
    return Episode(
        env_name=str(env or ""),
        attributes={
            str(k): n
            for k, v in (attributes.items() if isinstance(attributes, Mapping) else [])
            if (n := _stored_number(v)) is not None
        },
        components={
            str(source): {
                str(k): n for k, v in table.items() if (n := _stored_number(v)) is not None
            }
            for source, table in (components.items() if isinstance(components, Mapping) else [])
            if isinstance(table, Mapping)
        },
        completion_tokens=_stored_size(facts.get("completion_tokens")),
        completion_chars=_stored_size(facts.get("completion_chars")),
        lost=bool(lost),
    )


def _stored_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _stored_size(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _completion_chars(completion: Any) -> int | None:
    if completion is None:
        return None
    if isinstance(completion, str):
        return len(completion)
    if isinstance(completion, list):  # conversational: the assistant turns' text
        return sum(
            len(str(m.get("content") or ""))
            for m in completion
            if isinstance(m, Mapping) and m.get("role") == "assistant"
        )
    return None


def _attribute(episode: Episode, name: str) -> float | None:
    return episode.attributes.get(name)


def _env_reward(term: RewardTerm, episode: Episode) -> float | None:
    aggregate = term.params.get("aggregate", "result")
    key = {"result": "reward", "last": "reward_last", "sum": "reward_sum", "max": "reward_max"}[
        aggregate
    ]
    return _attribute(episode, key)


def _tool_called(term: RewardTerm, episode: Episode) -> float | None:
    successes = _attribute(episode, "tool_successes")
    return None if successes is None else (1.0 if successes > 0 else 0.0)


def _outcome(term: RewardTerm, episode: Episode) -> float | None:
    return _attribute(episode, "reward_last")


def _success_bonus(term: RewardTerm, episode: Episode) -> float | None:
    params = term.params_model()
    won = _attribute(episode, "won")
    if won is None:
        return None
    if not won:
        return 0.0
    if not params.speed_bonus:
        return 1.0
    steps = _attribute(episode, params.steps)
    limit = (
        params.max_steps
        if isinstance(params.max_steps, float)
        else _attribute(episode, params.max_steps)
    )
    if steps is None or not limit:
        return None
    return 1.0 + params.speed_bonus * (1.0 - steps / limit)


def _partial_credit(term: RewardTerm, episode: Episode) -> float | None:
    params = term.params_model()
    if _attribute(episode, "won"):
        return 0.0
    value = _attribute(episode, params.attribute)
    return None if value is None else params.scale * value


def _penalty(term: RewardTerm, episode: Episode) -> float | None:
    params = term.params_model()
    value = _attribute(episode, params.attribute)
    return None if value is None else -params.scale * value


def _tool_use(term: RewardTerm, episode: Episode) -> float | None:
    params = term.params_model()
    if params.tool is None:
        return _tool_called(term, episode)
    from envs.adapters.attributes import attribute_name

    calls = _attribute(episode, attribute_name(params.tool, "calls_")) or 0.0
    failures = _attribute(episode, attribute_name(params.tool, "failures_")) or 0.0
    return 1.0 if calls > failures else 0.0


def _length(term: RewardTerm, episode: Episode) -> float | None:
    params = term.params_model()
    size = episode.completion_tokens if params.unit == "tokens" else episode.completion_chars
    if size is None:
        return None
    return 1.0 if params.min <= size <= params.max else 0.0


def _component(term: RewardTerm, episode: Episode) -> float | None:
    params = term.params_model()
    return (episode.components.get(params.source) or {}).get(params.name)


def _expression(term: RewardTerm, episode: Episode) -> float | None:
    text = term.params["expression"]
    try:
        return expression_evaluate(text, episode.attributes)
    except ExpressionUnscored as exc:
        log.debug("reward term %s: unscored episode: %s", term.name, exc)
        return None
    except ExpressionError as exc:  # refused when saved: only a config written past the checks
        log.warning("reward term %s: refused expression: %s", term.name, exc)
        return None


LEAVES = {
    "env_reward": _env_reward,
    "tool_called": _tool_called,
    "outcome": _outcome,
    "success_bonus": _success_bonus,
    "partial_credit": _partial_credit,
    "penalty": _penalty,
    "tool_use": _tool_use,
    "length": _length,
    "component": _component,
    "expression": _expression,
}


def term_score(
    term: RewardTerm, episode: Episode, values: dict[str, float | None] | None = None
) -> float | None:
    """`term`'s score on `episode` (None: not applicable). `values`, when given, receives
    every node's score by name: how the total came out of the tree."""
    score = _score(term, episode, values)
    if values is not None:
        values[term.name] = score
    return score


def _score(
    term: RewardTerm, episode: Episode, values: dict[str, float | None] | None
) -> float | None:
    if episode.lost or (term.environments and episode.env_name not in term.environments):
        if values is not None:  # the whole subtree is not applicable
            for child in term.terms or []:
                term_score(child, episode, values)
        return None
    if term.kind not in LEAVES:
        return _container(term, episode, values)
    try:
        value = LEAVES[term.kind](term, episode)
    except (ArithmeticError, ValueError, TypeError) as exc:  # a reward never stops training
        log.warning("reward term %s failed: %s", term.name, exc)
        return None
    return float(value) if value is not None else None


def _container(
    term: RewardTerm, episode: Episode, values: dict[str, float | None] | None
) -> float | None:
    children = term.terms or []
    # Every child is scored (cheap, and the preview shows each); the result follows
    # OpenEnv's semantics (openenv.core.rubrics.containers).
    scores = [term_score(child, episode, values) for child in children]
    if term.kind == "gate":
        score = scores[0]
        if score is None:
            return None
        return 0.0 if score < float(term.params.get("threshold", 1.0)) else score
    if term.kind == "sequential":
        result: float | None = None
        for score in scores:
            if score is None:
                continue
            if score == 0.0:
                return 0.0
            result = score
        return result
    if term.kind == "weighted_sum":
        present = [
            (child.weight, s) for child, s in zip(children, scores, strict=True) if s is not None
        ]
        return sum(w * s for w, s in present) if present else None
    raise ValueError(f"unknown container kind {term.kind!r}")


def recipe_total(
    terms: list[RewardTerm], episode: Episode, values: dict[str, float | None] | None = None
) -> float | None:
    """The episode's total as TRL computes it from the compiled functions: the weighted
    sum of the top-level terms, None ones skipped; None when every one is None."""
    present = [(t.weight, s) for t in terms if (s := term_score(t, episode, values)) is not None]
    return sum(w * s for w, s in present) if present else None
