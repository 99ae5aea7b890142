"""Writes for evaluations: create (validated at the edge), cancel, and the worker's lease.

The lease is the runs' pattern (webapp.runs.services.run_claim): a conditional UPDATE takes
a queued evaluation, or a running one whose heartbeat went stale (its worker died); the
holder renews the heartbeat while it plays and records each episode under the lease, so a
takeover continues where the dead worker stopped (episodes already stored are kept). An
evaluation nobody takes over is marked failed by `evaluation_mark_stale_failed`, which beat's
sweep runs every 30 s (worker.tasks.sweep_stale_runs)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from envs.registry import recorded_adapter, solver_keys
from webapp.catalog.kinds import KINDS, environment_kind, probe_environment
from webapp.catalog.models import Environment
from webapp.catalog.probe import ProbeError
from webapp.catalog.selectors import environments_visible_to
from webapp.core import leases
from webapp.core.quota import WorkQuotaExceeded, lock_owner, work_quota_check
from webapp.core.transcripts import cap_transcript
from webapp.evaluations.config import (
    DEFAULT_PROMPTS,
    MAX_MODELS,
    RANDOM,
    REFERENCE_POLICIES,
    SOLVER,
    EvaluationRequest,
    parse_evaluation_request,
)
from webapp.evaluations.models import Evaluation, EvaluationEpisode
from webapp.runs.checkpoints import (
    ModelRefError,
    model_label,
    model_pinned,
    model_resolve,
    run_checkpoints,
)
from webapp.runs.config import CheckpointRef, GRPOSettings, RunConfig, RunConfigError
from webapp.runs.models import Run
from webapp.runs.services import RunStateError, _model_error

log = logging.getLogger(__name__)

# Enqueued by name: webapp code does not import the worker's task module.
EVALUATE_TASK = "worker.tasks.evaluate"

def _environment_error(environment: Environment | None, environment_id: int) -> str | None:
    if environment is None:
        # The same message for an environment that exists but is not the user's.
        return f"no environment with id {environment_id}"
    kind = environment_kind(environment.kind)
    if kind is None or not kind.evaluable:
        playable = " and ".join(k.label for k in KINDS.values() if k.evaluable)
        return f"environment '{environment.name}' ({environment.kind}) cannot be evaluated here: only {playable} servers"
    try:
        probe = probe_environment(environment.base_url, kind=environment.kind)
        problem = "" if probe.healthy else probe.error
    except ProbeError as exc:
        problem = str(exc)
    return f"environment '{environment.name}' is unhealthy: {problem}" if problem else None


def _resolved_models(
    request: EvaluationRequest, *, user: User, environment: Environment | None, key: str
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    entries: list[dict[str, Any]] = []
    errors: dict[str, list[str]] = {}
    seen: dict[str, int] = {}
    for index, model in enumerate(request.models):
        field = f"models.{index}"
        entry: dict[str, Any] = {"run": None, "step": None}
        if isinstance(model, str) and model in REFERENCE_POLICIES:
            if model == SOLVER and environment is not None and key not in solver_keys():
                name = environment.name if environment else "this environment"
                errors[field] = [
                    f"'{name}' has no solver (only the bundled {', '.join(solver_keys())} do)"
                ]
                continue
            if model == RANDOM and environment is not None and not environment.tools:
                errors[field] = [
                    f"'{environment.name}' lists no typed tools for a random policy to call"
                ]
                continue
            entry.update(spec=model, label=model, kind=model)
        elif isinstance(model, CheckpointRef):
            try:
                pinned = model_pinned(model=model, user=user)
                resolved = model_resolve(model=pinned, user=user)
            except ModelRefError as exc:
                errors[field] = [str(exc)]
                continue
            entry.update(
                spec=pinned.model_dump(mode="json")
                if isinstance(pinned, CheckpointRef)
                else pinned,
                label=model_label(pinned),
                title=resolved.label,
                kind="model",
                run=resolved.run_id,
                step=resolved.checkpoint,
            )
        else:
            try:
                # The runs' rules: folder roots, demo builds, the hub cache.
                problem = _model_error(model)
            except ValueError as exc:  # huggingface_hub refuses some ids the form allows (length)
                problem = f"'{model[:100]}' is not a usable hub id: {str(exc)[:200]}"
            if problem:
                errors[field] = [problem]
                continue
            entry.update(spec=model, label=model, kind="model")
        entry.setdefault("title", entry["label"])
        if entry["label"] in seen:
            errors[field] = [
                f"'{entry['label']}' is listed twice (as model {seen[entry['label']]})"
            ]
            continue
        seen[entry["label"]] = index
        entries.append(entry)
    return entries, errors


def evaluation_check(
    *, request: EvaluationRequest, user: User
) -> tuple[Environment | None, str, list[dict[str, Any]], dict[str, list[str]]]:
    """Rules that need the database, the disk or the environment server; changes nothing."""
    errors: dict[str, list[str]] = {}
    environment = environments_visible_to(user=user).filter(pk=request.environment).first()
    problem = _environment_error(environment, request.environment)
    if problem:
        errors["environment"] = [problem]
    spec = recorded_adapter(environment.metadata) if environment is not None else None
    key = spec.key if spec is not None else ""
    entries, model_errors = _resolved_models(request, user=user, environment=environment, key=key)
    errors.update(model_errors)
    prompt = request.prompt if request.prompt is not None else DEFAULT_PROMPTS.get(key)
    if environment is not None and (prompt is None or not prompt.strip()):
        errors["prompt"] = [
            "give the prompt of each episode (only the bundled environments have a default)"
        ]
    return environment, key, entries, errors


def evaluation_create(
    *, owner: User, data: Any, source_run: Run | None = None
) -> Evaluation:
    """Validate a request and queue the evaluation; a rejected request writes nothing."""
    request = parse_evaluation_request(data)
    environment, key, entries, errors = evaluation_check(request=request, user=owner)
    if errors or environment is None:
        raise RunConfigError(errors)
    prompt = request.prompt if request.prompt is not None else DEFAULT_PROMPTS[key]
    with transaction.atomic():
        lock_owner(owner)
        try:
            work_quota_check(owner)
        except WorkQuotaExceeded as exc:
            raise RunConfigError(exc.errors) from None  # the pages show a RunConfigError's lines
        evaluation = Evaluation.objects.create(
            owner=owner,
            environment=environment,
            environment_name=environment.name,
            environment_key=key,
            prompt=prompt,
            model_specs=entries,
            episodes=request.episodes,
            seed=request.seed,
            episode_seeds=request.episode_seeds or [],
            settings={
                "max_completion_length": request.max_completion_length,
                "max_tool_calling_iterations": request.max_tool_calling_iterations,
                "chat_template_kwargs": request.chat_template_kwargs,
                **({"reset": request.reset} if request.reset else {}),
            },
            source_run=source_run,
            total=request.episodes * len(entries),
        )
        evaluation_id = evaluation.pk
        transaction.on_commit(lambda: _send_evaluate_task(evaluation_id))
    return evaluation


def evaluation_create_for_checkpoints(
    *,
    owner: User,
    run: Run,
    environment_index: int = 0,
    episodes: int = 10,
    seed: int = 0,
) -> Evaluation:
    """An evaluation of every checkpoint of `run` (visible to `owner`: the caller checked) on
    one of its environments, with that environment's prompt and the run's generation limits."""
    checkpoints = run_checkpoints(run=run)
    if not checkpoints:
        raise RunConfigError({"run": [f"run {run.pk} has no checkpoint yet"]})
    config = RunConfig.model_validate(run.config)
    if not 0 <= environment_index < len(config.environments):
        raise RunConfigError(
            {
                "environment_index": [
                    f"the run has {len(config.environments)} environment(s), from index 0"
                ]
            }
        )
    item = config.environments[environment_index]
    if len(checkpoints) > MAX_MODELS:
        # Evenly spread over training, the first and the last always among them.
        last = len(checkpoints) - 1
        picked = sorted({round(i * last / (MAX_MODELS - 1)) for i in range(MAX_MODELS)})
        checkpoints = [checkpoints[i] for i in picked]
    # A warm-up alone has no GRPO settings: its model is played with GRPO's defaults.
    grpo = config.grpo or GRPOSettings()
    data = {
        "environment": item.environment,
        "models": [{"run": run.pk, "checkpoint": checkpoint.step} for checkpoint in checkpoints],
        "episodes": episodes,
        "seed": seed,
        "prompt": item.prompt,
        "max_completion_length": grpo.max_completion_length,
        "max_tool_calling_iterations": grpo.max_tool_calling_iterations,
        "chat_template_kwargs": grpo.chat_template_kwargs,
        **({"reset": item.reset} if item.reset else {}),  # the grid the run trained on
    }
    return evaluation_create(owner=owner, data=data, source_run=run)


def _send_evaluate_task(evaluation_id: int) -> None:
    from kombu.exceptions import OperationalError

    from webapp import celery_app  # the project's Celery app: imports no torch

    try:
        celery_app.send_task(EVALUATE_TASK, args=(evaluation_id,))
    except (OperationalError, OSError) as exc:
        log.warning("evaluation %s: the broker is unreachable (%s)", evaluation_id, exc)
        Evaluation.objects.filter(pk=evaluation_id, status=Evaluation.Status.QUEUED).update(
            status=Evaluation.Status.FAILED,
            finished_at=timezone.now(),
            error="The task queue was unreachable; start the evaluation again.",
        )


def evaluation_request_cancel(*, evaluation: Evaluation) -> Evaluation:
    """A queued evaluation stops at once; a running one after its current episode."""
    with transaction.atomic():
        evaluation = Evaluation.objects.select_for_update().get(pk=evaluation.pk)
        if evaluation.status == Evaluation.Status.QUEUED:
            evaluation.status = Evaluation.Status.CANCELLED
            evaluation.finished_at = timezone.now()
            evaluation.save(update_fields=["status", "finished_at"])
        elif evaluation.status == Evaluation.Status.RUNNING:
            evaluation.cancel_requested = True
            evaluation.save(update_fields=["cancel_requested"])
        else:
            raise RunStateError(
                f"only queued or running evaluations can be cancelled; this one is {evaluation.status}"
            )
    return evaluation


# --- the worker's lease -----------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    # "claimed"; "busy": alive under another lease; "duplicate": another message holds it;
    # "done": nothing left to do.
    outcome: str
    evaluation: Evaluation | None = None


def evaluation_claim(
    *, evaluation_id: int, lease_owner: str, worker_name: str, task_id: str = ""
) -> Claim:
    now = timezone.now()
    changed = Evaluation.objects.filter(leases.claimable(Evaluation), pk=evaluation_id).update(
        status=Evaluation.Status.RUNNING,
        lease_owner=lease_owner,
        worker_name=worker_name[:200],
        heartbeat_at=now,
        claim_task_id=task_id[:64],
        attempts=F("attempts") + 1,
    )
    evaluation = Evaluation.objects.filter(pk=evaluation_id).first()
    if changed != 1:
        return Claim(leases.claim_refused(evaluation, task_id), evaluation)
    assert evaluation is not None
    if evaluation.started_at is None:
        Evaluation.objects.filter(pk=evaluation_id, started_at__isnull=True).update(started_at=now)
    return Claim("claimed", evaluation)


def evaluation_heartbeat(*, evaluation_id: int, lease_owner: str) -> tuple[bool, bool]:
    """Renew the lease. Returns (still ours, cancel requested)."""
    return leases.renew(Evaluation, pk=evaluation_id, lease_owner=lease_owner, cancel=True)


def evaluation_record_episode(
    *, evaluation_id: int, lease_owner: str, episode: dict[str, Any]
) -> bool:
    """Store one played episode and count it, if we still hold the lease. An episode stored
    already (a redelivery replaying it) is left as it was and not counted twice."""
    with transaction.atomic():
        held = (
            Evaluation.objects.select_for_update()
            .filter(pk=evaluation_id, lease_owner=lease_owner, status=Evaluation.Status.RUNNING)
            .exists()
        )
        if not held:
            return False
        try:
            with transaction.atomic():
                EvaluationEpisode.objects.create(
                    evaluation_id=evaluation_id,
                    **{**episode, "messages": cap_transcript(episode.get("messages", []))},
                )
        except IntegrityError:
            return True
        Evaluation.objects.filter(pk=evaluation_id).update(
            done=F("done") + 1, heartbeat_at=timezone.now()
        )
    return True


def evaluation_finish(
    *, evaluation_id: int, lease_owner: str, status: str, error: str = ""
) -> bool:
    """End the evaluation if we still hold its lease."""
    return bool(
        Evaluation.objects.filter(
            pk=evaluation_id, lease_owner=lease_owner, status=Evaluation.Status.RUNNING
        ).update(
            status=status,
            error=error[:10_000],
            finished_at=timezone.now(),
            lease_owner="",
            cancel_requested=False,
        )
    )


def evaluation_mark_stale_failed() -> int:
    """Running evaluations whose worker stopped renewing the lease, and that nobody took
    over, fail (later than the takeover threshold: a redelivered task gets the first chance)."""
    return Evaluation.objects.filter(
        status=Evaluation.Status.RUNNING, heartbeat_at__lt=leases.interrupt_before()
    ).update(
        status=Evaluation.Status.FAILED,
        lease_owner="",
        finished_at=timezone.now(),
        cancel_requested=False,
        error="The worker stopped sending heartbeats; start the evaluation again.",
    )


new_lease_owner = leases.new_lease_owner
