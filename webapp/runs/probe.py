"""The learnability probe's place in a launch (issue 19 item 5).

The probe itself is a dry run of the run's own config (webapp/workbench/probe.py: its model,
temperature and group size on its first environment and its reward): it estimates the
model's pass rate `p` and the share of GRPO groups that would carry no signal,
`p^G + (1-p)^G`. Here: the key that says which runs a probe speaks for (everything that
changes what the probe plays or scores), and the newest probe a launch finds for its config,
which the run's first event and the launch's warnings then quote. The web app's workbench
starts probes; this app only reads their jobs, so the layers keep their order (a starter is
registered by the workbench app, for the new-run page, which lives here).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from webapp.jobs.models import Job
from webapp.rewards.terms import RecipeRef
from webapp.runs.config import RunConfig, RunConfigError

PROBE_JOB_KIND = "dry_run"  # a probe is a dry run (webapp/workbench/dry_run.py KIND) with params["probe_key"]
# A probe older than this speaks for no launch: the model or the server may have changed since.
PROBE_FRESH = timedelta(days=7)


def probe_key(config: RunConfig) -> str:
    """What a probe of `config` played and scored, hashed: two configs with one key probe alike.
    A recipe reference must be resolved first (recipe_resolve: it then carries its version's terms)."""
    grpo = config.grpo
    first = config.environments[0]
    facts = {
        "model": config.model if isinstance(config.model, str) else config.model.model_dump(mode="json"),
        "environment": first.environment,
        "name": first.name,
        "prompt": first.prompt,
        "reset": first.reset,
        # A recipe as resolved (its id, version and terms), or the terms themselves.
        "rewards": config.rewards.model_dump(mode="json") if isinstance(config.rewards, RecipeRef)
        else [term.model_dump(mode="json") for term in config.rewards],
        "temperature": grpo.temperature if grpo else None,
        "group_size": grpo.num_generations if grpo else None,
        "max_completion_length": grpo.max_completion_length if grpo else None,
        "max_tool_calling_iterations": grpo.max_tool_calling_iterations if grpo else None,
        "chat_template_kwargs": grpo.chat_template_kwargs if grpo else None,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def latest_probe(*, owner: User, key: str) -> dict[str, Any] | None:
    """The newest finished probe of `owner` for configs of `key`, as the run's first event
    quotes it: {job, pass_rate, expected_zero_variance_fraction, measured_zero_variance_fraction,
    group_size, episodes, warning}; None when there is none (fresh)."""
    job = (
        Job.objects.filter(
            owner=owner, kind=PROBE_JOB_KIND, status=Job.Status.SUCCEEDED, params__probe_key=key,
            finished_at__gte=timezone.now() - PROBE_FRESH,
        )
        .order_by("-finished_at", "-pk")
        .first()
    )
    result = job.result if job is not None and isinstance(job.result, dict) else None
    probe = result.get("probe") if result else None
    if job is None or result is None or not isinstance(probe, dict):
        return None
    return {
        "job": job.pk,
        "pass_rate": probe.get("pass_rate"),
        "expected_zero_variance_fraction": probe.get("expected_zero_variance_fraction"),
        "measured_zero_variance_fraction": result.get("zero_variance_fraction"),
        "group_size": probe.get("group_size"),
        "episodes": probe.get("episodes"),
        "warning": probe.get("warning") or "",
    }


def probe_sentence(probe: dict[str, Any]) -> str:
    """One line for the run's first event."""
    return (
        f"Learnability probe (job #{probe['job']}, {probe['episodes']} episodes): pass rate "
        f"{float(probe['pass_rate'] or 0):.2f}, about {round(float(probe['expected_zero_variance_fraction'] or 0) * 100)} % "
        f"of groups of {probe['group_size']} expected to carry no signal."
    )


# --- the starter the workbench registers (the new-run page's "Probe learnability") -----------

ProbeStarter = Callable[..., Job]
_starter: ProbeStarter | None = None


def register_probe_starter(starter: ProbeStarter) -> None:
    global _starter
    _starter = starter


def probe_start(*, owner: User, data: Any) -> Job:
    """Queue a probe of the run config `data` (raises RunConfigError naming the fields to fix)."""
    if _starter is None:
        raise RunConfigError({"non_field_errors": ["the learnability probe is not installed in this lab"]})
    return _starter(owner=owner, data=data)
