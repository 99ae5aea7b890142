"""The learnability probe (issue 19 item 5): before a run is spent, a dry run of the run's own
config: its model sampled at its temperature, in groups of its `num_generations`, on its first
environment's prompt and reset, scored by its reward. The dry-run report's `probe` (webapp/
workbench/dry_run.py learnability_probe) gives the pass rate `p`, the share of groups it
predicts carry no signal (`p^G + (1-p)^G`) and a warning past one half; the launch of the same
config quotes the newest probe in its first event (webapp/runs/probe.py).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from webapp.core.textcheck import nul_errors
from webapp.evaluations.config import DEFAULT_PROMPTS, parse_evaluation_request
from webapp.evaluations.services import evaluation_check
from webapp.jobs.models import Job
from webapp.jobs.services import job_create
from webapp.rewards.selectors import RecipeRefError, recipe_resolve
from webapp.rewards.terms import RecipeRef, RewardTerm, terms_dump
from webapp.runs.config import RunConfigError, parse_run_config
from webapp.runs.probe import probe_key
from webapp.workbench.dry_run import KIND, MAX_GROUP_SIZE, MAX_GROUPS, job_env_name

DEFAULT_GROUPS = 8


def run_probe_create(*, owner: User, data: Any, groups: int = DEFAULT_GROUPS) -> Job:
    """Queue a probe of the run config `data`; a refused config writes nothing (RunConfigError
    naming the config's fields, as a launch would)."""
    if not isinstance(data, dict):
        raise RunConfigError({"non_field_errors": ["expected a run config (a JSON object)"]})
    if nul := nul_errors(data):
        raise RunConfigError(nul)
    if not 1 <= groups <= MAX_GROUPS:
        raise RunConfigError({"groups": [f"between 1 and {MAX_GROUPS}"]})
    config = parse_run_config(data)
    grpo = config.grpo
    if grpo is None:
        raise RunConfigError({"grpo": ["the probe plays GRPO's groups: this config has no GRPO phase"]})
    if config.harness is not None:
        raise RunConfigError({"harness": ["a harness run's episodes are played by its agent: the probe cannot play them"]})
    if grpo.num_generations > MAX_GROUP_SIZE:
        raise RunConfigError({"grpo.num_generations": [f"the probe plays groups of at most {MAX_GROUP_SIZE}"]})
    if isinstance(config.rewards, RecipeRef):  # resolved as a launch resolves it: the same terms, the same key
        try:
            config.rewards = recipe_resolve(
                ref=config.rewards, user=owner, env_names=[item.name for item in config.environments]
            )
        except RecipeRefError as exc:
            raise RunConfigError({"rewards.recipe": [str(exc)]}) from None
    # The environment (probed once, here) and the model are checked as an evaluation's are.
    first = config.environments[0]
    model = config.model if isinstance(config.model, str) else config.model.model_dump(mode="json")
    request = parse_evaluation_request({
        "environment": first.environment, "models": [model], "episodes": groups, "seed": grpo.seed,
        "prompt": first.prompt or None, "reset": dict(first.reset),
        "max_completion_length": grpo.max_completion_length,
        "max_tool_calling_iterations": grpo.max_tool_calling_iterations,
        "chat_template_kwargs": dict(grpo.chat_template_kwargs),
    })
    environment, key, entries, found = evaluation_check(request=request, user=owner)
    if found or environment is None:
        raise RunConfigError({_run_field(field): messages for field, messages in found.items()})
    terms: list[RewardTerm] = list(config.rewards.terms or []) if isinstance(config.rewards, RecipeRef) else list(config.rewards)
    params = {
        "recipe": None,
        "recipe_name": f"run config '{config.name}'",
        "version": None,
        "terms": terms_dump(terms),
        "environment": environment.pk,
        "environment_name": environment.name,
        "environment_key": key,
        "name": job_env_name(first.name, environment),
        "prompt": request.prompt if request.prompt is not None else DEFAULT_PROMPTS[key],
        "seed": request.seed,
        "reset": dict(request.reset),
        "policy": entries[0],
        "groups": groups,
        "group_size": grpo.num_generations,
        "temperature": grpo.temperature,
        "max_completion_length": request.max_completion_length,
        "max_tool_calling_iterations": request.max_tool_calling_iterations,
        "chat_template_kwargs": request.chat_template_kwargs,
        # Which launches this probe speaks for (webapp/runs/probe.py).
        "probe_key": probe_key(config),
        "run_name": config.name,
        # The config as given: the new-run page's ?probe=<id> fills its JSON form with it.
        "run_config": data,
    }
    return job_create(owner=owner, kind=KIND, params=params, total=groups * grpo.num_generations)


def _run_field(field: str) -> str:
    """An evaluation request's field as the run config names it."""
    return {"models.0": "model", "environment": "environments.0.environment",
            "prompt": "environments.0.prompt"}.get(field, field)
