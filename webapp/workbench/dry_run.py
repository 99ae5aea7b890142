"""A recipe's dry run: K groups of G episodes played against the live environment by a policy
(random, solver, or a model or checkpoint, sampled as GRPO samples), scored by the recipe,
before any GPU is spent. Validated here, run by the worker (worker/play/dry_run.py) as a job.

The request's environment and policy follow the evaluations' rules (one check, in
webapp.evaluations.services.evaluation_check): the same errors for the same mistakes.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, TypedDict

from django.contrib.auth.models import User
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from webapp.core.textcheck import json_object_errors
from webapp.evaluations.config import DEFAULT_PROMPTS, parse_evaluation_request
from webapp.evaluations.services import evaluation_check
from webapp.jobs.models import Job
from webapp.jobs.services import job_create
from webapp.rewards.models import RewardRecipe
from webapp.rewards.selectors import recipe_version
from webapp.rewards.terms import RewardTerm, terms_dump
from webapp.runs.config import RunConfigError
from webapp.runs.forms import environment_slug
from webapp.workbench.payload import parse_extras

KIND = "dry_run"
MAX_GROUPS = 32
MAX_GROUP_SIZE = 16
HISTOGRAM_BINS = 10
# Groups whose totals spread less than this are "zero variance": GRPO's advantage is 0 there.
ZERO_STD = 1e-6
# When nothing else names it, the adapter is bound under this (a run's single environment's
# default name, webapp.runs.config).
FALLBACK_ENV_NAME = "env"

# The run-local environment name a recipe's `environments: [...]` refer to, under a run
# config's rule for it (webapp.runs.config RunEnvironment.name): lowercase letters, digits,
# '-' and '_'.
EnvName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]*$"),
    Field(description="The run-local environment name the recipe's terms are limited to "
                      "(`environments: [...]`); default: the environment's name as the run form makes it."),
]


def job_env_name(name: str | None, environment: Any) -> str:
    """The name a recipe job (dry run, learnability, fresh preview) binds its adapter under:
    the one asked for, else the catalog environment's name slug as the run form makes it
    (webapp.runs.forms.environment_slug), else FALLBACK_ENV_NAME."""

    return name or environment_slug(environment.name) or FALLBACK_ENV_NAME


class DryRunExtras(BaseModel):
    """What a dry run adds to the evaluations' request (environment, policy, seed, prompt)."""

    model_config = ConfigDict(extra="ignore")

    group_size: int = Field(default=4, ge=2, le=MAX_GROUP_SIZE)
    groups: int = Field(default=8, ge=1, le=MAX_GROUPS)
    temperature: float = Field(default=1.0, gt=0, le=5)
    version: int | None = Field(default=None, ge=1)
    name: EnvName | None = None


# Fields of the request, and where the evaluations' names for them are reported.
_RENAMED = {"models.0": "policy", "episodes": "groups"}
_OWN = ("group_size", "groups", "temperature", "version", "policy", "name")


def _parse(data: Any) -> tuple[Any, DryRunExtras]:
    if refused := json_object_errors(data):
        raise RunConfigError(refused)
    errors: dict[str, list[str]] = {}
    extras = parse_extras(DryRunExtras, data, errors)
    shared = {key: value for key, value in data.items() if key not in _OWN}
    shared["models"] = [data.get("policy", "random")]
    shared["episodes"] = extras.groups
    try:
        request = parse_evaluation_request(shared)
    except RunConfigError as exc:
        for key, messages in exc.errors.items():
            for prefix, name in _RENAMED.items():
                if key == prefix or key.startswith(prefix + "."):
                    key = name + key[len(prefix):]
            errors.setdefault(key, []).extend(m.replace("models.0: ", "") for m in messages)
        request = None
    if errors:
        raise RunConfigError(errors)
    return request, extras


def recipe_version_or_refuse(recipe: RewardRecipe, number: int | None) -> Any:
    """The recipe's version `number` (its latest for None), or a 400 naming `version`."""
    version = recipe_version(recipe=recipe, number=number)
    if version is None:
        raise RunConfigError({"version": [f"reward recipe '{recipe.name}' has no version {number}"]})
    return version


def recipe_job_params(
    *, recipe: RewardRecipe, version: Any, environment: Any, key: str, name: str | None, request: Any
) -> dict[str, Any]:
    """What every job that plays a recipe's episodes records (dry runs, learnability): the pinned
    version's terms, the environment, its run-local name, the prompt and the seed."""
    return {
        "recipe": recipe.pk,
        "recipe_name": recipe.name,
        "version": version.number,
        "terms": terms_dump([RewardTerm.model_validate(term) for term in version.terms]),
        "environment": environment.pk,
        "environment_name": environment.name,
        "environment_key": key,
        "name": job_env_name(name, environment),
        "prompt": request.prompt if request.prompt is not None else DEFAULT_PROMPTS[key],
        "seed": request.seed,
        # Every episode's reset options, as a run's environment sends them.
        "reset": dict(request.reset),
    }


def recipe_dry_run_create(*, owner: User, recipe: RewardRecipe, data: Any) -> Job:
    """Validate and queue a dry run of `recipe` (a version of it); a refused request writes nothing."""
    request, extras = _parse(data)
    version = recipe_version_or_refuse(recipe, extras.version)
    environment, key, entries, errors = evaluation_check(request=request, user=owner)
    errors = {_RENAMED.get(k, k): v for k, v in errors.items()}
    if errors or environment is None:
        raise RunConfigError(errors)
    params = {
        **recipe_job_params(recipe=recipe, version=version, environment=environment, key=key,
                            name=extras.name, request=request),
        "policy": entries[0],
        "groups": extras.groups,
        "group_size": extras.group_size,
        "temperature": extras.temperature,
        "max_completion_length": request.max_completion_length,
        "max_tool_calling_iterations": request.max_tool_calling_iterations,
        "chat_template_kwargs": request.chat_template_kwargs,
    }
    return job_create(owner=owner, kind=KIND, params=params, total=extras.groups * extras.group_size)


# --- the report (pure: the worker calls it on the scores it gathered) ----------------------------


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"count": 0, "mean": None, "std": None, "min": None, "max": None, "histogram": None}
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return {
        "count": len(values),
        "mean": mean,
        "std": std,
        "min": min(values),
        "max": max(values),
        "histogram": histogram(values),
    }


class Histogram(TypedDict):
    edges: list[float]  # bins + 1 of them
    counts: list[int]


def histogram(values: list[float], bins: int = HISTOGRAM_BINS) -> Histogram:
    """Equal-width bins over [min, max] (one bin when every value is the same)."""
    low, high = min(values), max(values)
    if high - low < ZERO_STD:
        return {"edges": [low, high], "counts": [len(values)]}
    width = (high - low) / bins
    counts = [0] * bins
    for value in values:
        counts[min(int((value - low) / width), bins - 1)] += 1
    return {"edges": [low + i * width for i in range(bins + 1)], "counts": counts}


def dry_run_report(
    *, groups: list[list[dict[str, float | None]]], term_names: list[str], policy: str,
    floor: float | None = None, ceiling: float | None = None,
) -> dict[str, Any]:
    """Per-term distributions, the total's, the zero-variance fraction of groups, the mean
    within-group spread, a verdict and the learnability probe's numbers (`probe`: the pass
    rate and the share of groups it predicts carry no signal). `groups`: per group, per
    episode, each term's score and "total" (None where it did not apply). A None total counts
    as 0, as TRL's nansum of no reward gives 0. `floor`/`ceiling`: the recipe's range on the
    environment, where it is known (webapp/workbench/learnability.py recipe_bounds)."""
    per_term = {
        name: {**_stats([v for g in groups for s in g if (v := s.get(name)) is not None]),
               "none": sum(1 for g in groups for s in g if s.get(name) is None)}
        for name in term_names
    }
    totals = [[float(s.get("total") or 0.0) for s in group] for group in groups]
    spreads = [_stats(group)["std"] or 0.0 for group in totals]
    flat = [value for group in totals for value in group]
    zero = sum(1 for spread in spreads if spread < ZERO_STD)
    fraction = zero / len(groups) if groups else 0.0
    return {
        "groups": len(groups),
        "group_size": len(groups[0]) if groups else 0,
        "terms": per_term,
        "total": _stats(flat),
        "zero_variance_fraction": fraction,
        "mean_group_std": sum(spreads) / len(spreads) if spreads else 0.0,
        "verdict": verdict(fraction, policy=policy),
        "probe": learnability_probe(flat, group_size=len(groups[0]) if groups else 0, floor=floor, ceiling=ceiling),
    }


def zero_variance_share(pass_rate: float, group_size: int) -> float:
    """The share of groups of `group_size` whose completions all pass or all fail, when each
    passes alone with probability `pass_rate`: p^G + (1-p)^G. Such a group's advantages are
    all zero: it teaches GRPO nothing."""
    return pass_rate**group_size + (1.0 - pass_rate) ** group_size


def learnability_probe(
    totals: list[float], *, group_size: int, floor: float | None = None, ceiling: float | None = None
) -> dict[str, Any]:
    """Issue 19's probe from a dry run's episode totals: the pass rate `p` (an episode passes
    above the middle of the recipe's range, or of the range scored here where the recipe's is
    unknown), the share of zero-variance groups it predicts, and a warning past one half."""
    if floor is not None and ceiling is not None and ceiling - floor >= ZERO_STD:
        threshold, basis = (floor + ceiling) / 2, "the middle of the recipe's range"
    elif totals:
        threshold, basis = (min(totals) + max(totals)) / 2, "the middle of the totals scored here"
    else:
        threshold, basis = 0.0, "no episode was scored"
    passed = sum(1 for total in totals if total > threshold + ZERO_STD)
    pass_rate = passed / len(totals) if totals else 0.0
    expected = zero_variance_share(pass_rate, group_size) if group_size else 1.0
    return {
        "episodes": len(totals),
        "passed": passed,
        "pass_rate": pass_rate,
        "pass_threshold": threshold,
        "threshold_from": basis,
        "group_size": group_size,
        "expected_zero_variance_fraction": expected,
        "warning": probe_warning(pass_rate, expected, group_size),
    }


def probe_warning(pass_rate: float, expected: float, group_size: int) -> str:
    """The warning, or "" when at least half the groups would carry a signal."""
    if expected <= 0.5:
        return ""
    return (
        f"About {round(expected * 100)} % of groups of {group_size} would give every completion the same "
        f"reward (pass rate {pass_rate:.2f}): more than half of GRPO's groups would carry no signal. Make the "
        "task easier or harder for this model, add a graded reward term, or raise num_generations."
    )


def verdict(fraction: float, *, policy: str) -> str:
    share = round(fraction * 100)
    if fraction >= 0.5:
        return (
            f"{share} % of groups give every episode the same reward: GRPO will learn little from "
            f"this recipe with {policy}"
        )
    return (
        f"{100 - share} % of groups separate their episodes: GRPO has differences to learn from "
        f"with this recipe and {policy}"
    )
