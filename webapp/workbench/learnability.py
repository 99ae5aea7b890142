"""A recipe's learnability card on one environment, after the statistical checks OpenEnv's
RFC 008 reserves for its hub (reward reachability, difficulty separation, headroom), measured
with the two reference policies this project has: the solver (the oracle) and the random
valid policy (a blind floor).

The worker (worker/play/learnability.py) plays the SAME seeded rows once with each, scores every
episode with the recipe as training would, and calls `learnability_report` here: pure
arithmetic on the score lists, so the numbers are tested on hand-made lists.

The reward range the checks measure against runs from `bottom` to `top`: the floor and the
ceiling the recipe's terms allow (`recipe_bounds`, interval arithmetic over the terms and the
bundled environments' known attribute ranges) where they can be computed, else the worst and
the best total seen. Positions are fractions of that range (0 at the bottom, 1 at the top).

Checks (each `pass` or `warn`, with its reason and numbers):
- reachability: the solver's best total lies in the top band, within TOP_BAND of the way
  from the band's base up to the top; also its mean and the share of its episodes in the band.
  The base is the bottom, or 0 where the range straddles 0: penalties can push a blind policy
  far below 0, and that must not widen what counts as reaching the top.
- random_low: random's mean sits at most RANDOM_LOW up the range and at most RANDOM_TOP_SHARE
  of its episodes reach the top band.
- separation: solver mean - random mean is at least SEPARATION pooled standard deviations
  (any positive difference when neither spreads), and the solver beats random on at least
  ROWS_AHEAD of the rows.
- headroom: the room between random's mean and the top is at least HEADROOM of the range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import User
from pydantic import BaseModel, ConfigDict, Field

from envs.registry import SpecTable
from webapp.evaluations.config import RANDOM, SOLVER, parse_evaluation_request
from webapp.evaluations.services import evaluation_check
from webapp.jobs.selectors import jobs_visible_to
from webapp.jobs.services import job_create
from webapp.rewards.selectors import recipes_visible_to
from webapp.rewards.terms import RewardTerm, walk_terms
from webapp.runs.config import RunConfigError
from webapp.workbench.dry_run import EnvName, Histogram, recipe_job_params, recipe_version_or_refuse
from webapp.workbench.payload import parse_extras

KIND = "learnability"
DEFAULT_EPISODES = 16
MAX_EPISODES = 64
HISTOGRAM_BINS = 10
ZERO = 1e-9

TOP_BAND = 0.2
RANDOM_LOW = 0.5
RANDOM_TOP_SHARE = 0.25
SEPARATION = 1.0
ROWS_AHEAD = 0.75
HEADROOM = 0.25

# The environment name the worker binds its adapter under when a job names none (jobs queued
# before they kept one; worker/play/dry_run.py ENV_NAME): a term limited to other environments
# scores None there, as in the dry run.
ENV_NAME = "env"

INF = math.inf
_COUNT = (0.0, INF)
# Ranges of attributes (envs/adapters/attributes.py), for the ceiling and the floor. Counts
# are never negative; an attribute not listed is unbounded (env rewards, server metadata).
COMMON_RANGES: dict[str, tuple[float, float]] = {
    "steps": _COUNT, "tool_calls": _COUNT, "tool_failures": _COUNT, "tool_successes": _COUNT,
    "reward_count": _COUNT, "lost": (0.0, 1.0), "won": (0.0, 1.0),
}  # fmt: skip
# Each bundled environment's own ranges come from its lab spec (envs/<key>/lab.py).
ENV_RANGES: Mapping[str, Mapping[str, tuple[float, float]]] = SpecTable(lambda spec: spec.ranges or None)


# --- the request (validated at the edge; a refusal writes nothing) ------------------------------


class LearnabilityExtras(BaseModel):
    model_config = ConfigDict(extra="ignore")

    episodes: int = Field(default=DEFAULT_EPISODES, ge=1, le=MAX_EPISODES)
    version: int | None = Field(default=None, ge=1)
    name: EnvName | None = None


ALLOWED = ("environment", "episodes", "seed", "version", "prompt", "name")


def _parse(data: Any) -> tuple[Any, LearnabilityExtras]:

    if not isinstance(data, dict):
        raise RunConfigError({"non_field_errors": ["expected a JSON object"]})
    errors: dict[str, list[str]] = {
        str(key): ["Extra inputs are not permitted"] for key in data if key not in ALLOWED
    }
    extras = parse_extras(LearnabilityExtras, data, errors)
    shared = {key: data[key] for key in ("environment", "seed", "prompt") if key in data}
    shared["models"] = [SOLVER, RANDOM]
    shared["episodes"] = extras.episodes
    request = None
    try:
        request = parse_evaluation_request(shared)
    except RunConfigError as exc:
        for key, messages in exc.errors.items():
            errors.setdefault(key, []).extend(messages)
    if errors:
        raise RunConfigError(errors)
    return request, extras


def recipe_learnability_create(*, owner: User, recipe: Any, data: Any) -> Any:
    """Validate and queue a learnability job for `recipe` (a version of it) on an environment."""

    request, extras = _parse(data)
    version = recipe_version_or_refuse(recipe, extras.version)
    environment, key, _entries, found = evaluation_check(request=request, user=owner)
    errors: dict[str, list[str]] = {}
    for field, messages in found.items():
        # "has no solver" / "lists no typed tools": facts about the environment.
        errors.setdefault("environment" if field.startswith("models") else field, []).extend(messages)
    if errors or environment is None:
        raise RunConfigError(errors)
    params = {
        **recipe_job_params(recipe=recipe, version=version, environment=environment, key=key,
                            name=extras.name, request=request),
        "episodes": extras.episodes,
    }
    return job_create(owner=owner, kind=KIND, params=params, total=2 * extras.episodes)


# --- the reward range the terms allow ------------------------------------------------------------


def _ranges(key: str) -> dict[str, tuple[float, float]]:
    return {**COMMON_RANGES, **ENV_RANGES.get(key, {})}


def _attribute(ranges: dict[str, tuple[float, float]], name: str) -> tuple[float, float]:
    if name.startswith(("calls_", "failures_")):
        return _COUNT
    return ranges.get(name, (-INF, INF))


def _scaled(scale: float, low: float, high: float) -> tuple[float, float]:
    def times(value: float) -> float:
        return 0.0 if scale == 0 else scale * value

    a, b = times(low), times(high)
    return (min(a, b), max(a, b))


def _leaf(term: RewardTerm, ranges: dict[str, tuple[float, float]], won: bool | None) -> tuple[float, float]:
    kind = term.kind
    if kind in ("tool_called", "tool_use", "length"):
        return (0.0, 1.0)
    if kind == "success_bonus":
        params = term.params_model()
        if won is False:
            return (0.0, 0.0)
        if not params.speed_bonus:
            return (1.0, 1.0) if won else (0.0, 1.0)
        # On a win at least one step was taken and at most max_steps: steps/max in [1/max, 1].
        limit_high = (
            params.max_steps if isinstance(params.max_steps, float)
            else _attribute(ranges, params.max_steps)[1]
        )  # fmt: skip
        least = 1.0 / limit_high if 0 < limit_high < INF else 0.0
        low, high = _scaled(params.speed_bonus, 0.0, 1.0 - least)
        low, high = 1.0 + low, 1.0 + high
        return (low, high) if won else (min(0.0, low), max(0.0, high))
    if kind == "partial_credit":
        params = term.params_model()
        if won is True:
            return (0.0, 0.0)
        low, high = _scaled(params.scale, *_attribute(ranges, params.attribute))
        return (low, high) if won is False else (min(0.0, low), max(0.0, high))
    if kind == "penalty":
        params = term.params_model()
        return _scaled(-params.scale, *_attribute(ranges, params.attribute))
    return (-INF, INF)  # env_reward, outcome, component, expression: the environment decides


def _bounds(
    term: RewardTerm, ranges: dict[str, tuple[float, float]], won: bool | None, name: str = ENV_NAME
) -> tuple[float, float]:
    if term.environments and name not in term.environments:
        return (0.0, 0.0)  # None: skipped by the weighted sum
    children = [_bounds(child, ranges, won, name) for child in term.terms or []]
    if term.kind == "weighted_sum":
        parts = [_scaled(child.weight, *b) for child, b in zip(term.terms or [], children, strict=True)]
        return (sum(p[0] for p in parts), sum(p[1] for p in parts))
    if term.kind == "gate":
        low, high = children[0]
        if high < float(term.params.get("threshold", 1.0)):
            return (0.0, 0.0)
        return (min(0.0, low), max(0.0, high))
    if term.kind == "sequential":
        low, high = children[-1]
        return (min(0.0, low), max(0.0, high))
    return _leaf(term, ranges, won)


def recipe_bounds(
    terms: list[RewardTerm], key: str, name: str = ENV_NAME
) -> tuple[float | None, float | None]:
    """(floor, ceiling) of the recipe's total on environment `key` bound under the run-local
    `name` (terms limited to other names add nothing), None where unbounded.
    Winning and partial credit exclude each other, so a recipe with either is bounded once
    for a win and once for a loss, and the wider pair is kept."""
    ranges = _ranges(key)
    kinds = {term.kind for _, term, _ in walk_terms(terms)}
    cases: list[bool | None] = [True, False] if kinds & {"success_bonus", "partial_credit"} else [None]
    lows, highs = [], []
    for won in cases:
        parts = [_scaled(term.weight, *_bounds(term, ranges, won, name)) for term in terms]
        low, high = sum(p[0] for p in parts), sum(p[1] for p in parts)
        lows.append(low)
        highs.append(high)
    floor, ceiling = min(lows), max(highs)
    return (floor if math.isfinite(floor) else None, ceiling if math.isfinite(ceiling) else None)


# --- the report (pure: the worker calls it on the scores it gathered) ----------------------------


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _std(values: list[float]) -> float:
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) if values else 0.0


def _histogram(values: list[float], low: float, high: float, bins: int = HISTOGRAM_BINS) -> Histogram:
    """Counts over equal bins of [low, high], the same edges for both policies."""
    if high - low < ZERO:
        return {"edges": [low, high], "counts": [len(values)]}
    width = (high - low) / bins
    counts = [0] * bins
    for value in values:
        counts[max(0, min(int((value - low) / width), bins - 1))] += 1
    return {"edges": [low + i * width for i in range(bins + 1)], "counts": counts}


def _side(scores: list[dict[str, float | None]], names: list[str], top_band: float, edges: tuple[float, float]) -> dict[str, Any]:
    totals = [float(s.get("total") or 0.0) for s in scores]
    return {
        "count": len(totals),
        "mean": _mean(totals),
        "std": _std(totals),
        "min": min(totals) if totals else None,
        "max": max(totals) if totals else None,
        "at_top": sum(1 for t in totals if t >= top_band - ZERO) / len(totals) if totals else 0.0,
        "histogram": _histogram(totals, *edges),
        "terms": {
            name: {
                "mean": _mean(present) if (present := [float(v) for s in scores if (v := s.get(name)) is not None]) else None,
                "none": sum(1 for s in scores if s.get(name) is None),
            }
            for name in names
        },
    }


def _g(value: float) -> str:
    return f"{value:.3g}"


def _pct(fraction: float) -> str:
    return f"{round(fraction * 100)} %"


def learnability_report(
    *,
    solver: list[dict[str, float | None]],
    random: list[dict[str, float | None]],
    term_names: list[str],
    floor: float | None,
    ceiling: float | None,
) -> dict[str, Any]:
    """The card. `solver[i]` and `random[i]` are the scores (each term's and "total"; None where
    it did not apply, a None total counting as 0) of the same seeded row i."""
    if not solver or len(solver) != len(random):
        raise ValueError("give one solver and one random score per row, for at least one row")
    s_totals = [float(s.get("total") or 0.0) for s in solver]
    r_totals = [float(s.get("total") or 0.0) for s in random]
    seen = s_totals + r_totals
    best, worst = max(seen), min(seen)
    # A computed bound the data passes means the attribute ranges were wrong: trust the data.
    top, top_source = (ceiling, "terms") if ceiling is not None and ceiling >= best - ZERO else (best, "best seen")
    bottom, bottom_source = (floor, "terms") if floor is not None and floor <= worst + ZERO else (worst, "worst seen")
    span = top - bottom
    base = 0.0 if bottom < 0.0 < top else bottom
    band = top - TOP_BAND * (top - base)
    edges = (bottom, top)
    s_side = _side(solver, term_names, band, edges)
    r_side = _side(random, term_names, band, edges)

    def position(value: float) -> float:
        return (value - bottom) / span if span > ZERO else 1.0

    def reach_of(value: float) -> float:
        return (value - base) / (top - base) if top - base > ZERO else 1.0

    s_mean, r_mean = s_side["mean"], r_side["mean"]
    difference = s_mean - r_mean
    pooled = math.sqrt((s_side["std"] ** 2 + r_side["std"] ** 2) / 2)
    effect = difference / pooled if pooled > ZERO else None
    ahead = sum(1 for s, r in zip(s_totals, r_totals, strict=True) if s > r + ZERO) / len(s_totals)
    headroom = top - r_mean
    where = "the ceiling the terms allow" if top_source == "terms" else "the best total seen (no ceiling from the terms)"
    checks: dict[str, dict[str, Any]] = {}

    if span <= ZERO:
        reason = f"every episode scores {_g(top)}: the recipe gives nothing to learn from"
        for name in ("reachability", "random_low", "separation", "headroom"):
            checks[name] = {"status": "warn", "reason": reason}
    else:
        reach = reach_of(s_side["max"])
        checks["reachability"] = {
            "status": "pass" if s_side["max"] >= band - ZERO else "warn",
            "reason": (
                f"the solver reaches {_g(s_side['max'])} of a top of {_g(top)} ({where}); "
                f"{_pct(s_side['at_top'])} of its episodes are in the top band"
                if s_side["max"] >= band - ZERO else
                f"the solver's best, {_g(s_side['max'])}, gets {reach:.2f} of the way up to "
                f"{_g(top)} ({where}): the top may be out of reach"
            ),
            "solver_mean": s_mean, "solver_max": s_side["max"], "top": top,
            "position": reach, "mean_position": reach_of(s_mean), "at_top": s_side["at_top"],
        }  # fmt: skip
        low = position(r_mean)
        random_ok = low <= RANDOM_LOW + ZERO and r_side["at_top"] <= RANDOM_TOP_SHARE + ZERO
        checks["random_low"] = {
            "status": "pass" if random_ok else "warn",
            "reason": (
                f"random's mean, {_g(r_mean)}, sits at {low:.2f} of the range"
                + (f"; {_pct(r_side['at_top'])} of its episodes reach the top band" if r_side["at_top"] else "")
                + ("" if random_ok else ": a blind policy already scores high")
            ),
            "random_mean": r_mean, "random_max": r_side["max"], "position": low, "at_top": r_side["at_top"],
        }  # fmt: skip
        separated = difference > ZERO and (effect is None or effect >= SEPARATION) and ahead >= ROWS_AHEAD - ZERO
        size = f"{effect:.2f} pooled std" if effect is not None else "neither policy spreads"
        checks["separation"] = {
            "status": "pass" if separated else "warn",
            "reason": (
                f"solver - random = {_g(difference)} ({size}); the solver beats random on "
                f"{_pct(ahead)} of the rows"
                + ("" if separated else ": the recipe barely tells a good policy from a blind one")
            ),
            "difference": difference, "pooled_std": pooled, "effect_size": effect, "rows_ahead": ahead,
        }  # fmt: skip
        room = headroom / span
        checks["headroom"] = {
            "status": "pass" if room >= HEADROOM - ZERO else "warn",
            "reason": (
                f"random leaves {room:.2f} of the range ({_g(headroom)}) below the top"
                if room >= HEADROOM - ZERO else
                f"random already reaches {1 - room:.2f} of the top: little to learn"
            ),
            "headroom": headroom, "fraction": room,
        }  # fmt: skip
    warned = [f"{name}: {check['reason']}" for name, check in checks.items() if check["status"] == "warn"]
    return {
        "episodes": len(solver),
        "range": {
            "top": top, "top_source": top_source, "bottom": bottom, "bottom_source": bottom_source,
            "ceiling": ceiling, "floor": floor, "top_band": band,
        },
        "solver": s_side,
        "random": r_side,
        "checks": checks,
        "verdict": {
            "status": "warn" if warned else "pass",
            "text": "; ".join(warned) if warned else (
                "the solver reaches the top, random stays low and there is room between them: "
                "GRPO has something to learn here"
            ),
        },
    }  # fmt: skip


# --- reads: the latest card per recipe for an environment ----------------------------------------


def learnability_cards(*, user: Any, environment_id: int, limit: int = 200) -> list[dict[str, Any]]:
    """The user's newest succeeded learnability job per recipe (of theirs that still exists)
    on environment `environment_id`, newest first."""

    jobs = (
        jobs_visible_to(user=user)
        .filter(kind=KIND, status="succeeded", params__environment=environment_id)
        .order_by("-finished_at", "-id")[:limit]
    )
    recipes = set(recipes_visible_to(user=user).values_list("pk", flat=True))
    cards: dict[int, dict[str, Any]] = {}
    for job in jobs:
        params = job.params if isinstance(job.params, dict) else {}
        recipe = params.get("recipe")
        result = job.result if isinstance(job.result, dict) else {}
        if recipe in cards or recipe not in recipes or not isinstance(result.get("checks"), dict):
            continue
        cards[recipe] = {
            "job": job,
            "recipe": recipe,
            "recipe_name": str(params.get("recipe_name", "")),
            "version": params.get("version"),
            "episodes": result.get("episodes"),
            "verdict": result.get("verdict") or {},
            "checks": [
                {"name": name, "status": str(check.get("status", "")), "reason": str(check.get("reason", ""))}
                for name, check in result["checks"].items()
                if isinstance(check, dict)
            ],
            "solver_mean": (result.get("solver") or {}).get("mean"),
            "random_mean": (result.get("random") or {}).get("mean"),
            "top": (result.get("range") or {}).get("top"),
            "top_source": (result.get("range") or {}).get("top_source"),
        }
    return list(cards.values())
