"""Reward terms compiled to TRL reward functions.

The kinds, their parameters and how each scores an episode are in webapp/rewards (terms.py,
the one registry; scoring.py): here they only become what GRPOTrainer calls,
`f(prompts, completions, completion_ids, environments, **kw) -> list[float | None]`, one
function per term, named after it, so each gets its own `rewards/<name>/mean|std` curve.

TRL's total is `nansum(weight_i * r_i)` over the functions: a weighted sum of the
top-level terms. A container (`gate`, `sequential`, `weighted_sum`) is not a weighted sum
of its leaves (a gate multiplies nothing, it cuts), so the composition cannot be spread
over leaf weights. Instead a container at the top level is one function carrying its
composed score, with the container's weight; every term below it (leaves and inner
containers) is still compiled, with weight 0: its curve is logged and it adds nothing to
the total. The total therefore follows the tree exactly (scoring.recipe_total is the same
sum), and a recipe of leaves only compiles as it always did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from webapp.rewards.scoring import Episode, episode_from_adapter, term_score
from webapp.rewards.terms import RecipeRef, RewardTerm, walk_terms

log = logging.getLogger(__name__)

RewardFunc = Callable[..., list[float | None]]


# The episode each environment instance was last scored on, with the completion ids it was
# scored for: every reward function of a batch gets the same `completion_ids` lists, so the
# attributes are read once per rollout, not once per term; the trainer stores the same
# episode with the rollout (worker/training/runner.py), so a re-score sees what training saw. Holding
# the ids list keeps its identity from being reused by a later batch's list.
_SCORED: dict[int, tuple[Any, Any, Episode | None]] = {}


def _episode(env: Any, completion_ids: Any, completion: Any) -> Episode | None:
    cached = _SCORED.get(id(env))
    if cached is not None and completion_ids is not None and cached[0] is env and cached[1] is completion_ids:
        return cached[2]
    try:
        episode: Episode | None = episode_from_adapter(env, completion_ids=completion_ids, completion=completion)
    except Exception as exc:  # an odd adapter leaves the rollout unscored, never stops the run
        log.warning("reading episode attributes failed: %s", exc)
        episode = None
    if completion_ids is not None:
        _SCORED[id(env)] = (env, completion_ids, episode)
    return episode


def scored_episode(env: Any) -> Episode | None:
    """The episode `env` was last scored on by a compiled reward function, or None."""
    cached = _SCORED.get(id(env))
    return cached[2] if cached is not None and cached[0] is env else None


def compile_term(term: RewardTerm) -> RewardFunc:
    """One TRL reward function for `term` (a leaf, or a container scoring its whole tree)."""

    def reward(
        *,
        environments: list[Any] | None = None,
        completions: list[Any] | None = None,
        completion_ids: list[Any] | None = None,
        **_: Any,
    ) -> list[float | None]:
        out: list[float | None] = []
        for index, env in enumerate(environments or []):
            ids = (
                completion_ids[index]
                if completion_ids is not None and index < len(completion_ids)
                else None
            )
            text = (
                completions[index] if completions is not None and index < len(completions) else None
            )
            episode = _episode(env, ids, text)
            out.append(None if episode is None else term_score(term, episode))
        return out

    reward.__name__ = term.name
    reward.__qualname__ = term.name
    return reward


def compile_rewards(terms: list[RewardTerm] | RecipeRef) -> tuple[list[RewardFunc], list[float]]:
    """The reward functions and their weights (GRPOConfig.reward_weights) for a run's
    `rewards`: a list of terms, or a recipe reference already resolved at launch."""
    if isinstance(terms, RecipeRef):
        if terms.terms is None:
            raise ValueError(f"reward recipe {terms.recipe} was not resolved when the run launched")
        terms = terms.terms
    _SCORED.clear()  # a new run: the previous one's environments may go
    funcs: list[RewardFunc] = []
    weights: list[float] = []
    for term in terms:
        funcs.append(compile_term(term))
        weights.append(float(term.weight))
        if term.terms:
            # Below a container: curves only (weight 0); the container's function scores the tree.
            for _, inner, _ in walk_terms(term.terms):
                funcs.append(compile_term(inner))
                weights.append(0.0)
    return funcs, weights
