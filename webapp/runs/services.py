"""Writes for runs: launch, cancel, resume, the worker's lease, and recorded telemetry."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from envs import capacity as limits
from envs.adapters.kinds import harbor
from envs.netguard import OutboundRefused, check_outbound_url
from webapp.catalog.capacity import capacity_is_lower_bound, capacity_shown
from webapp.catalog.kinds import environment_kind, probe_environment
from webapp.catalog.models import Environment
from webapp.catalog.probe import ProbeError
from webapp.catalog.selectors import environments_visible_to
from webapp.core import leases
from webapp.core.errors import StateConflict
from webapp.core.quota import WorkQuotaExceeded, active_work, lock_owner, work_quota_check
from webapp.rewards.selectors import RecipeRefError, recipe_resolve
from webapp.rewards.terms import RecipeRef
from webapp.runs.checkpoints import (
    ModelRefError,
    ResolvedModel,
    model_label,
    model_pinned,
    model_resolve,
    run_checkpoint,
)
from webapp.runs.config import (
    DEPRECATED_WARMUP_KEY,
    CheckpointRef,
    RunConfig,
    RunConfigError,
    config_to_store,
    in_keys_given,
    parse_run_config,
)
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent
from webapp.runs.probe import latest_probe, probe_key, probe_sentence
from webapp.runs.routing import TRAIN_QUEUE, Needs, queue_for, run_needs
from webapp.runs.selectors import (
    run_environment_refusal,
    run_live_note,
    run_resumable,
    runs_visible_to,
)
from webapp.runs.signals import run_ended
from webapp.runs.telemetry import metric_tiers
from webapp.runs.telemetry.live import notify_run
from webapp.runs.telemetry.notify import run_notify_end
from webapp.runs.workers import run_worker_refusal

log = logging.getLogger(__name__)

# Enqueued by name: webapp code does not import the worker's task module.
TRAIN_TASK = "worker.tasks.train_run"
# The event kind of what a launch was warned about (run_config_warnings): the run page lists
# it with the others, and POST /api/runs/ answers with these messages as `warnings`.
LAUNCH_WARNING = "launch_warning"
# The warm-up's metrics (worker/training/warmup.py), numbered by SFT step.
WARMUP_METRIC_PREFIX = "sft/"


class RunStateError(StateConflict):
    """The run is not in a state that allows this action."""


class RunQuotaExceeded(RunConfigError):
    """The owner already has as many queued and running runs as one account may."""


def model_path(model: str) -> Path | None:
    """Where a run's model lives on this machine, or None for a hub id."""
    if model.startswith("demo:"):
        return settings.MODELS_DIR / model.removeprefix("demo:")
    if model.startswith("/"):
        return Path(model)
    return None


def model_roots() -> list[Path]:
    """The folders local models may be loaded from: MODELS_DIR and ENVLAB_MODEL_ROOTS."""
    return [Path(settings.MODELS_DIR), *(Path(root) for root in settings.ENVLAB_MODEL_ROOTS)]


def model_folder_error(path: Path) -> str | None:
    """Why a local folder may not be trained from, or None. Compares real paths (every
    symlink followed), so a link inside a root that points out of it is outside. The
    message is the same whether or not the folder exists: it must not reveal the disk."""
    try:
        real = path.resolve()
        roots = [root.resolve() for root in model_roots()]
        # Checkpoints are reached through their run, which is owner-checked, not by path.
        inside = any(real.is_relative_to(root) for root in roots) and not real.is_relative_to(
            Path(settings.RUNS_DIR).resolve()
        )
    except (OSError, RuntimeError):  # unreadable, or a symlink loop
        inside = False
    if inside:
        return None
    return f"local model folders must be under {', '.join(str(root) for root in model_roots())}"


def _model_error(model: str) -> str | None:
    path = model_path(model)
    if path is not None and not model.startswith("demo:"):
        refused = model_folder_error(path)
        if refused:
            return refused
    if path is None:
        # A hub id: offline machines can only use what the hub cache already holds.
        import os

        if os.environ.get("HF_HUB_OFFLINE") == "1":
            from huggingface_hub import try_to_load_from_cache

            if not isinstance(try_to_load_from_cache(model, "config.json"), str):
                return f"model '{model}' is not in the local hub cache and this machine is offline"
        return None
    if not (path / "config.json").is_file():
        if model.startswith("demo:"):
            name = model.removeprefix("demo:")
            # A Catch base is its own variant: built as the default one it would be an echo model.
            variant = " --variant catch-base" if name.startswith("catch-base") else ""
            return f"demo model '{model}' is not built; run `python manage.py build_demo_model {name}{variant}`"
        return f"no model folder with a config.json at {path}"
    return None


def _vllm_server_error(url: str | None) -> str | None:
    """The worker connects to a vLLM server: the same outbound rules as an environment's URL."""
    if url is None:
        return None
    try:
        check_outbound_url(url, name="vllm_server_base_url", timeout=settings.ENVLAB_PROBE_DEADLINE)
    except (OutboundRefused, ProbeError) as exc:
        return str(exc)
    return None


def _tool_shape(tool: Any) -> str:
    """Argument names, types and which are required: what must agree for one router to offer it."""
    parameters = tool.get("parameters") if isinstance(tool, dict) else None
    parameters = parameters if isinstance(parameters, dict) else {}
    properties = found if isinstance(found := parameters.get("properties"), dict) else {}
    return json.dumps(
        [{k: (v.get("type") if isinstance(v, dict) else None) for k, v in properties.items()},
         sorted(str(r) for r in parameters.get("required") or [] if isinstance(r, str))],
        sort_keys=True,
    )


def _continued_adapter_error(config: RunConfig, resolved: ResolvedModel) -> str | None:
    """A LoRA run from a LoRA checkpoint continues that adapter (a new one on the merged weights
    would be saved against the base model without the first adapter): its shape must match."""
    recorded = resolved.adapter_settings()
    if config.peft is None or recorded is None:
        return None
    asked = {"r": config.peft.r, "lora_alpha": config.peft.lora_alpha}
    if recorded == asked:
        return None
    return (
        f"{resolved.label} is a LoRA adapter with r={recorded['r']}, lora_alpha={recorded['lora_alpha']}; "
        "a LoRA run from it continues that adapter: give the same r and lora_alpha, "
        "or no `peft` to train every weight of the merged model"
    )


def run_config_check(*, config: RunConfig, user: User) -> dict[str, list[str]]:
    """Rules that need the database or the disk. Re-probes each environment's health."""
    errors: dict[str, list[str]] = {}
    if isinstance(config.model, CheckpointRef):
        try:
            resolved = model_resolve(model=config.model, user=user)
            model_error = None
        except ModelRefError as exc:
            model_error = str(exc)
        else:
            peft_error = _continued_adapter_error(config, resolved)
            if peft_error:
                errors["peft"] = [peft_error]
    else:
        model_error = _model_error(config.model)
    if model_error:
        errors["model"] = [model_error]
    vllm_error = _vllm_server_error(config.generation.vllm_server_base_url)
    if vllm_error:
        errors["generation.vllm_server_base_url"] = [vllm_error]
    if isinstance(config.rewards, RecipeRef):

        # Resolved once, here: the run records the exact version and its terms, and trains on them.
        try:
            names = [item.name for item in config.environments]
            config.rewards = recipe_resolve(ref=config.rewards, user=user, env_names=names)
        except RecipeRefError as exc:
            errors["rewards.recipe"] = [str(exc)]
    if config.sft_warmup is not None:
        errors.update(_warmup_errors(config=config, user=user))
    tool_owner: dict[str, tuple[str, str]] = {}
    for index, item in enumerate(config.environments):
        key = f"environments.{index}.environment"
        # Only environments the launching user may see (webapp.catalog.selectors); the message
        # is the same for one that exists but is not theirs.
        environment = environments_visible_to(user=user).filter(pk=item.environment).first()
        if environment is None:
            errors[key] = [f"no environment with id {item.environment}"]
            continue
        kind = environment_kind(environment.kind)
        if kind is None:
            errors[key] = [f"environment '{environment.name}' ({environment.kind}) cannot be trained on here"]
            continue
        if (kind.trains_in == "harness") != (config.harness is not None):
            errors[key] = [
                f"environment '{environment.name}' is a {kind.label} server: it trains in a harness run (give `harness`)"
                if kind.trains_in == "harness"
                else f"a harness run trains on a Harbor server; '{environment.name}' is {environment.kind}"
            ]
            continue
        if kind.trains_in == "harness":
            errors.update(_harness_errors(config=config, environment=environment))
        for field, message in kind.entry_errors(environment, item).items():
            errors[f"environments.{index}.{field}"] = [message]
        for tool in environment.tools if isinstance(environment.tools, list) else []:
            name = str(tool.get("name", "")) if isinstance(tool, dict) else ""
            shape = _tool_shape(tool)
            other = tool_owner.setdefault(name, (item.name, shape))
            if other[1] != shape:
                errors[key] = [
                    f"tool '{name}' of '{environment.name}' clashes with the tool of the same name in "
                    f"'{other[0]}' (other arguments); one run cannot offer both"
                ]
        # Checked live, but not stored: a rejected request changes no row.
        try:
            probe = probe_environment(
                environment.base_url, kind=environment.kind,
                ors_env=str((environment.metadata or {}).get("ors_env", "")),
            )
            problem = "" if probe.healthy else probe.error
        except ProbeError as exc:
            problem = str(exc)
        if problem:
            errors[key] = [f"environment '{environment.name}' is unhealthy: {problem}"]
        elif config.harness is None:
            errors.update(_capacity_findings(config=config, environment=environment, index=index, refusing=True))
    return errors


def run_config_warnings(*, config: RunConfig, user: User) -> dict[str, list[str]]:
    """What a launch that passed `run_config_check` should still be told: a capacity that is
    only a lower bound and below what the run holds at once (it may or may not fit)."""
    warnings: dict[str, list[str]] = {}
    for index, item in enumerate(config.environments):
        environment = environments_visible_to(user=user).filter(pk=item.environment).first()
        if environment is not None:
            warnings.update(_capacity_findings(config=config, environment=environment, index=index, refusing=False))
    return warnings


def _capacity_findings(
    *, config: RunConfig, environment: Environment, index: int, refusing: bool
) -> dict[str, list[str]]:
    """The run needs more sessions at once than the environment's capacity: a refusal where the
    capacity is the server's limit (declared, measured, or stated in a refusal), a warning
    where a measurement only found a lower bound (`refusing` picks which are returned). A
    lower bound never refuses: a chess server measured "at least 22" held 64."""
    capacity = environment.capacity
    lower_bound = capacity_is_lower_bound(environment)
    if capacity is None or lower_bound == refusing:
        return {}
    harness = config.harness
    if harness is not None:
        field, needed = "harness.max_concurrent_rollouts", harness.max_concurrent_rollouts + 1
        wanted = (
            f"the {needed} that {harness.max_concurrent_rollouts} rollouts in flight need (one more for the "
            "rollout worker)"
        )
    else:
        field = f"environments.{index}.environment"
        # A warm-up alone plays its episodes one at a time: one session per environment.
        # Every training process plays its own generation batch at once (worker/training/distributed.py).
        needed = config.grpo.generation_batch_size * config.ranks if config.grpo is not None else 1
        wanted = (
            f"the generation batch of {needed} rollouts (per_device_train_batch_size x "
            f"gradient_accumulation_steps{' x processes' if config.ranks > 1 else ''})"
        )
    if capacity >= needed:
        return {}
    _, source = capacity_shown(environment)
    takes = f"environment '{environment.name}' takes {'at least ' if lower_bound else ''}{limits.sessions(capacity)}"
    takes += f" ({source})" if source else ""
    if not refusing:
        return {field: [
            f"{takes}, fewer than {wanted}: the run is launched, but if the server takes "
            f"fewer than {needed} it refuses a session and the run fails. To know its limit, measure its "
            "capacity again with a longer ENVLAB_PROBE_DEADLINE, or register it declaring its capacity"
        ]}
    bundled = limits.row_reads_max_concurrent_envs(kind=environment.kind, metadata=environment.metadata)
    if harness is not None:
        server = limits.more_sessions_advice(reads_max_concurrent_envs=bundled)
        fewer = f"lower harness.max_concurrent_rollouts to {capacity - 1}, or " if capacity >= 2 else ""
        return {field: [f"{takes}, fewer than {wanted}: {fewer}{server}"]}
    advice = limits.shortfall_advice(
        capacity=capacity, num_generations=config.grpo.num_generations if config.grpo is not None else None,
        processes=config.ranks, reads_max_concurrent_envs=bundled,
    )
    return {field: [f"{takes}, fewer than {wanted}: {advice}"]}


def _harness_errors(*, config: RunConfig, environment: Environment) -> dict[str, list[str]]:
    """A harness run's dataset, harness and sandbox must be ones the Harbor server listed when it
    was registered (webapp.catalog.harbor), and the server must hold one more session than the
    rollouts in flight (the harness rollout worker keeps one for itself)."""
    harness = config.harness
    assert harness is not None
    catalog = harbor.catalog(environment.metadata)
    errors: dict[str, list[str]] = {}

    def names(key: str, *, available_only: bool = False) -> list[str]:
        return [
            str(item.get("name")) for item in catalog.get(key) or []
            if isinstance(item, dict) and (not available_only or item.get("available") is True)
        ]

    for field, key, value in (("dataset", "datasets", harness.dataset), ("harness", "harnesses", harness.harness),
                              ("sandbox", "sandboxes", harness.sandbox)):
        offered = names(key, available_only=key == "sandboxes")
        if value not in offered:
            listed = ", ".join(offered[:20]) or "none"
            errors[f"harness.{field}"] = [f"'{environment.name}' offers {key}: {listed}; not '{value}'"]
    sizes = {str(d.get("name")): d.get("num_tasks") for d in catalog.get("datasets") or [] if isinstance(d, dict)}
    available = sizes.get(harness.dataset)
    if isinstance(available, int) and harness.tasks > available:
        errors["harness.tasks"] = [f"dataset '{harness.dataset}' has {available} tasks, fewer than {harness.tasks}"]
    errors.update(_capacity_findings(config=config, environment=environment, index=0, refusing=True))
    return errors


def _warmup_errors(*, config: RunConfig, user: User) -> dict[str, list[str]]:
    """The warm-up's source must exist: a solver for every environment (only bundled ones have
    one; a random policy is not a warm-up), or a visible run with rollouts good enough to keep."""
    from envs.registry import recorded_adapter, solver_keys
    from envs.solvers import solver_class

    warmup = config.sft_warmup
    assert warmup is not None
    errors: dict[str, list[str]] = {}
    if warmup.source == "run":
        assert warmup.run is not None  # WarmupSettings' validator: source "run" names its run
        source = runs_visible_to(user=user).filter(pk=warmup.run).first()
        if source is None:
            # The same message for a run that exists but is not theirs.
            return {"sft_warmup.run": [f"no run with id {warmup.run}"]}
        kept = Rollout.objects.filter(run=source, unscored=False, reward__gte=warmup.min_reward).count()
        if not kept:
            errors["sft_warmup.run"] = [
                f"run {source.pk} has no scored rollout with a reward of at least {warmup.min_reward:g}: "
                "lower sft_warmup.min_reward or pick another run"
            ]
        return errors
    keys = solver_keys()
    having = f"{', '.join(keys[:-1])} and {keys[-1]}" if len(keys) > 1 else "".join(keys)
    for index, item in enumerate(config.environments):
        environment = environments_visible_to(user=user).filter(pk=item.environment).first()
        if environment is None:
            continue  # reported against the environment itself
        spec = recorded_adapter(environment.metadata)
        if spec is None or solver_class(spec.key) is None:
            errors[f"environments.{index}.environment"] = [
                f"environment '{environment.name}' has no solver (only the bundled {having} have one): "
                'use sft_warmup source "run" with an earlier run\'s rollouts'
            ]
    return errors


def _active_runs_error(owner: User) -> str | None:
    limit = settings.ENVLAB_MAX_ACTIVE_RUNS
    # External runs train elsewhere and take no worker (webapp/runs/external.py).
    active = Run.objects.filter(owner=owner, status__in=Run.ACTIVE, external=False).count()
    if active < limit:
        return None
    return (
        f"you have {active} queued or running runs, and one account may have at most {limit} at "
        "once: wait for one to finish, or cancel one"
    )


def _quota_refusal(owner: User) -> str | None:
    """Why `owner` may not queue one more run now (their runs, or all their work: webapp/core/
    quota.py), or None. Locks the owner's row for the caller's transaction, so two launches or
    resumes at once cannot both pass."""
    lock_owner(owner)
    refusal = _active_runs_error(owner)
    if refusal:
        return refusal
    try:
        work_quota_check(owner)
    except WorkQuotaExceeded as exc:
        return " ".join(exc.errors["non_field_errors"])
    return None


@dataclass
class LaunchPlan:
    """A config that passed every check of a launch but the quota, ready to be created."""

    config: RunConfig
    needs: Needs
    # Deprecated keys and capacity findings: the run's launch_warning events.
    warnings: dict[str, list[str]]
    # No worker can carry the run now, and the config says to wait for one.
    waiting: str | None
    # The newest learnability probe of this config (webapp/runs/probe.py), quoted by the first event.
    probe: dict[str, Any] | None = None


def run_launch_plan(*, owner: User, config: RunConfig) -> LaunchPlan:
    """Every check of a launch but the quota (it probes each environment); raises RunConfigError
    naming each field to fix. Writes nothing."""
    errors = run_config_check(config=config, user=owner)
    if errors:
        raise RunConfigError(in_keys_given(errors, legacy_warmup=DEPRECATED_WARMUP_KEY in config.deprecations))
    # Deprecated keys first: the launch response's `warnings` and the run's launch_warning events.
    warnings = {**config.deprecations, **run_config_warnings(config=config, user=owner)}
    # Before the model is pinned: the probe keyed the config as it was given.
    probe = latest_probe(owner=owner, key=probe_key(config)) if config.grpo is not None else None
    if probe is not None and probe["warning"]:
        warnings.setdefault("probe", []).append(f"{probe['warning']} (learnability probe, job #{probe['job']})")
    # Last: a config that is wrong anyway hears about what to fix in it first.
    waiting = run_worker_refusal(config=config)
    if waiting and not config.wait_for_worker:
        raise RunConfigError({"device": [waiting]})
    try:
        config.model = model_pinned(model=config.model, user=owner)
    except ModelRefError as exc:  # the checkpoint went away since the check
        raise RunConfigError({"model": [str(exc)]}) from None
    return LaunchPlan(config=config, needs=run_needs(config), warnings=warnings, waiting=waiting, probe=probe)


def run_create(*, owner: User, plan: LaunchPlan, group: str = "", pending: str = "") -> Run:
    """The run's rows, in the caller's transaction (which checked the quota). `pending`: the
    run waits (status pending, no task sent) and its first event says why; otherwise it is
    queued and its task sent once the transaction commits."""
    config, needs = plan.config, plan.needs
    run = Run.objects.create(
        owner=owner,
        name=config.name,
        config=config_to_store(config),
        model=model_label(config.model),
        max_steps=config.total_steps,
        queue=queue_for(needs),
        needs_gpus=needs.gpus,
        needs_vllm=needs.vllm,
        phase=Run.Phase.WARMUP if config.sft_warmup is not None else Run.Phase.GRPO,
        status=Run.Status.PENDING if pending else Run.Status.QUEUED,
        sent_at=None if pending else timezone.now(),
        sends=0 if pending else 1,
        group=group,
    )
    run.environments.set([item.environment for item in config.environments])
    # The first event quotes the config's learnability probe, where one was run.
    probe = {"probe": plan.probe} if plan.probe is not None else {}
    told = f" {probe_sentence(plan.probe)}" if plan.probe is not None else ""
    if pending:
        RunEvent.objects.create(run=run, kind="pending", message=pending + told, data=probe)
    else:
        queued = "Run queued." if run.queue == TRAIN_QUEUE else f"Run queued for a worker with {needs.describe()} ({run.queue})."
        RunEvent.objects.create(run=run, kind="queued", message=queued + told, data=probe)
    for field, messages in plan.warnings.items():
        for message in messages:
            RunEvent.objects.create(run=run, kind=LAUNCH_WARNING, message=message, data={"field": field})
    if plan.waiting:
        RunEvent.objects.create(run=run, kind="waiting_for_worker", message=plan.waiting)
    if not pending:
        _enqueue_on_commit(run)
    return run


def run_launch(*, owner: User, data: Any) -> Run:
    """Validate a raw config and queue the run; a rejected config writes nothing."""
    config = parse_run_config(data)
    # Before the checks, which probe every environment: a refused launch costs nothing.
    quota = _active_runs_error(owner)
    if quota:
        raise RunQuotaExceeded({"non_field_errors": [quota]})
    plan = run_launch_plan(owner=owner, config=config)
    with transaction.atomic():
        quota = _quota_refusal(owner)
        if quota:
            raise RunQuotaExceeded({"non_field_errors": [quota]})
        return run_create(owner=owner, plan=plan)


def run_slots_free(owner: User) -> int:
    """How many more runs `owner` may queue now: the fewer of what ENVLAB_MAX_ACTIVE_RUNS and
    ENVLAB_MAX_ACTIVE_WORK (runs, evaluations and jobs together) leave. Call it after
    `lock_owner` in the transaction that queues them."""
    runs = Run.objects.filter(owner=owner, status__in=Run.ACTIVE).count()
    work = sum(active_work(owner).values())
    return max(0, min(int(settings.ENVLAB_MAX_ACTIVE_RUNS) - runs, int(settings.ENVLAB_MAX_ACTIVE_WORK) - work))


def run_release(*, run_id: int, message: str, data: dict[str, Any] | None = None) -> bool:
    """Queue a pending run (one conditional UPDATE: a run released twice, or by two callers at
    once, is queued and sent once) and send its task once the caller's transaction commits.
    The caller checked the quota. Returns whether this call released it."""
    changed = Run.objects.filter(pk=run_id, status=Run.Status.PENDING).update(
        status=Run.Status.QUEUED, sent_at=timezone.now(), sends=1
    )
    if not changed:
        return False
    RunEvent.objects.create(run_id=run_id, kind="queued", message=message, data=data or {})
    transaction.on_commit(lambda: _send_train_task(run_id, record_failure=True))
    _announce(run_id, "status")
    return True


def run_cancel_pending(*, run_id: int, message: str, data: dict[str, Any] | None = None) -> bool:
    """Cancel a run that is still pending (conditional: a run released meanwhile is left alone),
    with an event saying why. Returns whether this call cancelled it."""
    changed = Run.objects.filter(pk=run_id, status=Run.Status.PENDING).update(
        status=Run.Status.CANCELLED, finished_at=timezone.now()
    )
    if not changed:
        return False
    RunEvent.objects.create(run_id=run_id, kind="cancelled", message=message, data=data or {})
    _announce(run_id, "status")
    return True


def _ended(run_id: int) -> None:
    """Announce, once the caller's transaction commits, that the run ended (webapp/runs/signals.py).
    A receiver that fails is logged, never the run's end's failure: beat catches up."""

    def send() -> None:
        owner_id = Run.objects.filter(pk=run_id).values_list("owner_id", flat=True).first()
        if owner_id is None:
            return
        for receiver, result in run_ended.send_robust(sender=Run, run_id=run_id, owner_id=owner_id):
            if isinstance(result, Exception):
                log.warning("run %s ended; %r failed: %r", run_id, receiver, result)

    # Robust: the end is committed; a database gone away meanwhile must not fail the caller.
    transaction.on_commit(send, robust=True)


def run_queue(run: Run) -> str:
    """The Celery queue the run's train task goes to, chosen at launch (webapp/runs/routing.py)."""
    return run.queue


def _enqueue_on_commit(run: Run) -> None:
    """Send the train task once the run's row is committed (before, a worker may not see it).
    The caller stamped `sent_at`; a failed send clears it, and beat sends again."""
    run_id = run.pk
    transaction.on_commit(lambda: _send_train_task(run_id, record_failure=True))


def _announce(run_id: int, kind: str = "facts") -> None:
    """Tell the run's page, once the write is committed, that its status ("status"), facts or
    events ("facts") changed. Best effort and never raises: a page that misses it catches up
    over REST when it reconnects or hears the next one."""

    def send() -> None:
        try:
            note = run_live_note(run_id=run_id, kind=kind)
        except DatabaseError as exc:
            log.warning("live notification for run %s not built: %s", run_id, exc)
            return
        if note is not None:
            notify_run(run_id, note)

    transaction.on_commit(send)


def _send_train_task(run_id: int, *, record_failure: bool) -> bool:
    """Hand the run to the broker. An unreachable broker is not the request's failure: the
    run stays queued, and `run_requeue_unclaimed` (beat) sends it once the broker is back."""
    from kombu.exceptions import OperationalError

    from webapp import celery_app  # the project's Celery app: imports no torch

    try:
        queue = Run.objects.filter(pk=run_id).values_list("queue", flat=True).first()
        # By capability: only workers that can carry the run consume its queue.
        celery_app.send_task(TRAIN_TASK, args=(run_id,), queue=queue or TRAIN_QUEUE)
        return True
    except (OperationalError, OSError) as exc:
        log.warning("run %s: the broker is unreachable (%s); beat will send the run again", run_id, exc)
    try:
        Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(sent_at=None)
        if record_failure:
            RunEvent.objects.create(
                run_id=run_id, kind="broker_unreachable",
                message="Queued; the broker was unreachable, beat will re-send the run.",
            )
            _announce(run_id)
    except DatabaseError:  # then the row keeps its stamp, and beat re-sends it a little later
        log.exception("run %s: could not record the failed send", run_id)
    return False


def _requeue_interval(sends: int) -> timedelta:
    # Doubles with each send, up to 8x: a run waiting behind a long one gets a copy of its
    # message now and then, not one a minute (copies are harmless, see `run_claim`).
    return timedelta(seconds=settings.ENVLAB_REQUEUE_SECONDS * 2 ** min(max(sends - 1, 0), 3))


def run_requeue_unclaimed() -> int:
    """Send again the train task of queued runs that no worker claimed: the broker was down
    at launch, lost the message, or a worker acknowledged it while the database was away.

    Safe to run concurrently with itself: each re-send is taken by a conditional UPDATE of
    the run's send stamp. Returns how many runs were sent.
    """
    now = timezone.now()
    oldest = now - timedelta(seconds=settings.ENVLAB_REQUEUE_SECONDS)
    candidates = list(
        Run.objects.filter(status=Run.Status.QUEUED)
        .filter(Q(sent_at__isnull=True) | Q(sent_at__lt=oldest))
        .values_list("pk", "sent_at", "sends")
    )
    sent = 0
    for run_id, sent_at, sends in candidates:
        if sent_at is not None and now - sent_at < _requeue_interval(sends):
            continue
        taken = Run.objects.filter(
            pk=run_id, status=Run.Status.QUEUED, sent_at=sent_at, sends=sends
        ).update(sent_at=now, sends=F("sends") + 1)
        if not taken or not _send_train_task(run_id, record_failure=False):
            continue
        sent += 1
        RunEvent.objects.create(
            run_id=run_id, kind="requeued",
            message="No worker had claimed the run: its task was sent again.",
            data={"sends": sends + 1, "previous_send": sent_at.isoformat() if sent_at else None},
        )
        _announce(run_id)
    return sent


def run_request_cancel(*, run: Run) -> Run:
    """Queued runs stop at once; a running one stops at its next step with a checkpoint."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status in (Run.Status.QUEUED, Run.Status.PENDING):
            was_queued = run.status == Run.Status.QUEUED
            run.status = Run.Status.CANCELLED
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "finished_at"])
            RunEvent.objects.create(run=run, kind="cancelled", message="Cancelled before it started.")
            if was_queued:
                _ended(run.pk)
        elif run.status == Run.Status.RUNNING and run.external:
            # No worker to stop at a step: it ends now, and the script's next log is refused (409).
            run.status = Run.Status.CANCELLED
            run.finished_at = timezone.now()
            run.lease_owner = ""
            run.save(update_fields=["status", "finished_at", "lease_owner"])
            RunEvent.objects.create(run=run, kind="cancelled", message="Cancelled; the script's next log is refused.")
        elif run.status == Run.Status.RUNNING:
            if not run.cancel_requested:
                run.cancel_requested = True
                run.save(update_fields=["cancel_requested"])
                RunEvent.objects.create(run=run, kind="cancel_requested", message="Cancel requested.")
        else:
            raise RunStateError(f"only queued or running runs can be cancelled; this one is {run.status}")
    _announce(run.pk, "status")
    return run


# A run stopped because its owner may no longer see one of its environments (security review
# N10): the event's data says so, beside the message that names the environment.
ACCESS_LOST = "environment_not_shared"


def _stop_without_access(*, run_id: int, reason: str, unclaimed: bool = False) -> bool:
    """Cancel a queued run, or ask a running one to stop as a cancel does, saying `reason`.
    `unclaimed`: only a run no worker holds (queued, or running under a stale lease) and end
    it now, as cancelled. Returns whether anything changed (a run already ended or asked to
    stop is left as it is)."""
    with transaction.atomic():
        rows = Run.objects.select_for_update()
        run = (rows.filter(leases.claimable(Run)) if unclaimed else rows).filter(pk=run_id).first()
        if run is None:
            return False
        data = {"reason": ACCESS_LOST}
        if run.status in (Run.Status.QUEUED, Run.Status.PENDING) or unclaimed:
            message = "Cancelled" if run.status == Run.Status.RUNNING else "Cancelled before it started"
            run.status = Run.Status.CANCELLED
            run.finished_at = timezone.now()
            run.error = reason[:10_000]
            run.lease_owner = ""
            run.cancel_requested = False
            run.save(update_fields=["status", "finished_at", "error", "lease_owner", "cancel_requested"])
            RunEvent.objects.create(run=run, kind="cancelled", message=f"{message}: {reason}.", data=data)
            _ended(run.pk)
        elif run.status == Run.Status.RUNNING and not run.cancel_requested:
            run.cancel_requested = True
            run.save(update_fields=["cancel_requested"])
            RunEvent.objects.create(run=run, kind="cancel_requested", message=f"Cancel requested: {reason}.",
                                    data=data)
        else:
            return False
    _announce(run_id, "status")
    return True


def runs_stop_without_access(*, environment_id: int) -> list[int]:
    """Stop the queued and running runs on environment `environment_id` whose owners may no
    longer see it (its owner made it private: webapp.catalog.signals): queued ones are
    cancelled, running ones asked to stop at their next step with a checkpoint, each saying
    which environment is no longer shared with them. Returns the ids of the runs stopped.
    The owner's runs, and those of users who see every entry, go on."""
    stopped = []
    active = Run.objects.filter(environments=environment_id, status__in=Run.NOT_ENDED).select_related("owner")
    for run in active.order_by("pk"):
        reason = run_environment_refusal(run=run, environment_ids=[environment_id])
        if reason and _stop_without_access(run_id=run.pk, reason=reason):
            stopped.append(run.pk)
    return stopped


def run_resume(*, run: Run, checkpoint: int | None = None) -> Run:
    """Queue the run again from its last checkpoint (interrupted, cancelled, or failed for a
    reason that says nothing against the run: `run_resumable`). `checkpoint`: restart from that
    recorded checkpoint instead, as a new attempt; what the run recorded after it is forgotten
    when the worker starts (run_rewind), and its later checkpoints removed."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        resumable, why_not = run_resumable(run=run)
        if not resumable:
            raise RunStateError(why_not)
        hidden = run_environment_refusal(run=run)
        if hidden:
            raise RunStateError(f"the run cannot resume: {hidden}")
        fields = ["status", "cancel_requested", "error", "failure", "finished_at", "sent_at", "sends"]
        if checkpoint is not None:
            try:
                chosen = run_checkpoint(run=run, checkpoint=checkpoint)
            except ModelRefError as exc:
                raise RunStateError(str(exc)) from None
            if chosen.phase == "warmup" and run.phase == Run.Phase.WARMUP:
                raise RunStateError("the warm-up is not done: there is no checkpoint 0 to restart from yet")
            # Step 0 is the warm-up's model: GRPO starts from it again.
            run.checkpoint_step = chosen.step or None
            fields.append("checkpoint_step")
        quota = _quota_refusal(run.owner)
        if quota:
            raise RunStateError(quota)
        previous = run.status
        run.status = Run.Status.QUEUED
        run.cancel_requested = False
        run.error = ""
        run.failure = ""
        run.finished_at = None
        run.sent_at = timezone.now()
        run.sends = 1
        run.save(update_fields=fields)
        start = run.checkpoint_step or 0
        message = (
            f"Restart queued from checkpoint step {start} as a new attempt." if checkpoint is not None
            else f"Resume queued from checkpoint step {start}."
        )
        RunEvent.objects.create(
            run=run, kind="resumed", message=message,
            data={"from_status": previous, "checkpoint_step": start, "restart": checkpoint is not None},
        )
        _enqueue_on_commit(run)
    _announce(run.pk, "status")
    return run


# --- the worker's lease -----------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    # "claimed"; "busy": alive elsewhere, this message may take it over if that worker dies;
    # "duplicate": another message claimed it, this copy has nothing to do; "done";
    # "full": an environment's sessions are taken by running runs, the run waits its turn
    outcome: str
    run: Run | None = None
    takeover: bool = False


def run_claim(*, run_id: int, lease_owner: str, worker_name: str, task_id: str = "") -> Claim:
    """Take the run's lease with one conditional UPDATE.

    Succeeds only when the run is queued, or running under a heartbeat gone stale (its
    worker died): then this claim takes it over and continues from the last checkpoint.
    A run may have several messages (beat re-sends unclaimed runs). Only the message that
    claimed it comes back when its worker is lost, so only that one waits to take over;
    any other copy finds the run claimed and returns ("duplicate").
    """
    now = timezone.now()
    # An external run has no task; a message naming one (forged, or a stray id) takes nothing.
    if Run.objects.filter(pk=run_id, external=True).exists():
        return Claim("done", Run.objects.filter(pk=run_id).first())
    run = Run.objects.filter(leases.claimable(Run), pk=run_id).select_related("owner").first()
    reason = run_environment_refusal(run=run) if run is not None else ""
    if reason and _stop_without_access(run_id=run_id, reason=reason, unclaimed=True):
        # Queued (or left by a dead worker) while its owner lost sight of an environment: it
        # does not start again (security review N10); its checkpoints stay.
        return Claim("done", Run.objects.filter(pk=run_id).first())
    with transaction.atomic():
        # One cutoff for both questions: a message that waits out a dead worker's lease claims at
        # the moment it goes stale, when two readings of the clock could disagree (a takeover
        # recorded as a first claim).
        cutoff = leases.stale_before()
        was_running = Run.objects.filter(
            Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True), pk=run_id, status=Run.Status.RUNNING
        ).exists()
        if not was_running:
            full = _sessions_short(run_id)
            if full is not None:
                _note_waiting(run_id, full)
                return Claim("full", Run.objects.filter(pk=run_id).first())
        changed = Run.objects.filter(leases.claimable(Run, before=cutoff), pk=run_id).update(
            status=Run.Status.RUNNING,
            lease_owner=lease_owner,
            worker_name=worker_name[:200],
            heartbeat_at=now,
            claim_task_id=task_id[:64],
        )
        if changed != 1:
            run = Run.objects.filter(pk=run_id).first()
            return Claim(leases.claim_refused(run, task_id), run)
        run = Run.objects.get(pk=run_id)
        run.attempts += 1
        run.started_at = run.started_at or now
        run.save(update_fields=["attempts", "started_at"])
        kind = "taken_over" if was_running else "claimed"
        RunEvent.objects.create(
            run=run, kind=kind, message=f"{worker_name} claimed the run (attempt {run.attempts}).",
            data={"attempt": run.attempts, "checkpoint_step": run.checkpoint_step},
        )
    _announce(run_id, "status")
    return Claim("claimed", run, takeover=was_running)


def _sessions_needed(config: RunConfig) -> int:
    """Sessions a run holds at once on each of its environments (as `_capacity_findings`)."""
    if config.harness is not None:
        return config.harness.max_concurrent_rollouts + 1
    return config.grpo.generation_batch_size * config.ranks if config.grpo is not None else 1


def _sessions_short(run_id: int) -> str | None:
    """Why the queued run cannot start now, or None: one of its environments has a capacity
    that is the server's limit (not a measured lower bound) and the running runs on it hold
    too many of its sessions for this one's too (security review K6: checked at launch
    alone, two runs on one server could together exceed it). Takes the environments' rows
    for the transaction, so two claims that would exceed it together are one after another."""
    run = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).first()
    if run is None:
        return None
    try:
        config = parse_run_config(run.config)
    except Exception:  # a config the launch accepted: the trainer reports what is wrong with it
        return None
    ids = {entry.environment for entry in config.environments}
    # (environment, its capacity): the servers whose capacity is a known limit.
    limited = [
        (env, env.capacity)
        for env in Environment.objects.select_for_update().filter(pk__in=ids).order_by("pk")
        if env.capacity is not None and not capacity_is_lower_bound(env)
    ]
    if not limited:
        return None
    needed = _sessions_needed(config)
    held = {env.pk: 0 for env, _ in limited}
    for other in Run.objects.filter(status=Run.Status.RUNNING).exclude(pk=run_id).only("pk", "config"):
        try:
            other_config = parse_run_config(other.config)
        except Exception:
            continue
        for pk in {entry.environment for entry in other_config.environments} & held.keys():
            held[pk] += _sessions_needed(other_config)
    for env, capacity in limited:
        if held[env.pk] and held[env.pk] + needed > capacity:
            return (
                f"waiting for sessions: environment '{env.name}' takes {limits.sessions(capacity)}, "
                f"running runs hold {held[env.pk]} and this run needs {needed}; it starts when they end"
            )
    return None


def _note_waiting(run_id: int, reason: str) -> None:
    """One `waiting` event per reason (a claim retries every heartbeat). The run's message is
    held by the waiting worker: the send stamp is renewed so beat does not send it again."""
    Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(sent_at=timezone.now())
    last = RunEvent.objects.filter(run_id=run_id).order_by("-id").values_list("kind", "message").first()
    if last != ("waiting", reason):
        RunEvent.objects.create(run_id=run_id, kind="waiting", message=reason, data={"reason": "capacity"})
        _announce(run_id, "facts")


@transaction.atomic
def run_rewind(*, run_id: int, lease_owner: str, to_step: int, keep_warmup: bool = False) -> bool:
    """Forget what was recorded after `to_step`: training continues from there, and the
    steps after it belong to a timeline that is being redone. Only the lease holder may.
    `keep_warmup`: the warm-up is done (its model is on disk) and is not redone, so its own
    metrics (`sft/*`, numbered by SFT step) stay."""
    run = Run.objects.select_for_update().filter(pk=run_id, lease_owner=lease_owner).first()
    if run is None:
        return False
    forgotten = MetricPoint.objects.filter(run=run, step__gt=to_step)
    if keep_warmup:
        forgotten = forgotten.exclude(key__startswith=WARMUP_METRIC_PREFIX)
    forgotten.delete()
    metric_tiers.tiers_forget_after(run_id=run.pk, step=to_step)
    Rollout.objects.filter(run=run, step__gt=to_step).delete()
    run.step = to_step
    run.checkpoint_step = to_step or None
    run.save(update_fields=["step", "checkpoint_step"])
    RunEvent.objects.create(run=run, kind="started", message=f"Training from step {to_step}.")
    _announce(run_id)  # a new attempt: the alerts of the last one are no longer active
    return True


def run_phase_set(*, run_id: int, lease_owner: str, phase: str, step: int, data: dict[str, Any] | None = None) -> bool:
    """Enter a phase of training ("warmup", then "grpo") at `step` (the step counter is the
    phase's own: SFT steps, then GRPO steps). Only the lease holder may. Announced as a fact."""
    if phase not in Run.Phase.values:
        raise ValueError(f"unknown phase {phase!r}")
    with transaction.atomic():
        changed = Run.objects.filter(pk=run_id, lease_owner=lease_owner, status=Run.Status.RUNNING).update(
            phase=phase, step=step
        )
        if changed:
            label = "SFT warm-up" if phase == Run.Phase.WARMUP else "GRPO"
            RunEvent.objects.create(
                run_id=run_id, kind="phase", message=f"{label} started.", data={"phase": phase, **(data or {})}
            )
    if changed:
        _announce(run_id)
    return bool(changed)


def run_warmup_done(*, run_id: int, lease_owner: str, data: dict[str, Any]) -> bool:
    """Record the warm-up's outcome (episodes kept, loss) as a run event. Only the lease holder may."""
    with transaction.atomic():
        if not Run.objects.filter(pk=run_id, lease_owner=lease_owner, status=Run.Status.RUNNING).exists():
            return False
        kept = int(data.get("episodes_kept", 0))
        RunEvent.objects.create(
            run_id=run_id, kind="warmup_done",
            message=f"SFT warm-up done: {kept} episode(s) kept of {int(data.get('episodes_seen', 0))}.",
            data=data,
        )
    _announce(run_id)
    return True


def run_heartbeat(*, run_id: int, lease_owner: str, step: int | None = None) -> tuple[bool, bool]:
    """Renew the lease. Returns (still ours, cancel requested)."""
    fields: dict[str, Any] = {} if step is None else {"step": Greatest(F("step"), Value(step))}
    return leases.renew(Run, pk=run_id, lease_owner=lease_owner, cancel=True, **fields)


def run_checkpointed(*, run_id: int, lease_owner: str, step: int) -> list[dict[str, Any]]:
    """Record the newest checkpoint; return the notification to publish, as
    `telemetry_record` does (the worker's sink announces it after the telemetry before it)."""
    changed = Run.objects.filter(pk=run_id, lease_owner=lease_owner).update(checkpoint_step=step)
    return [{"type": "facts", "checkpoint": step}] if changed else []


def run_finish(
    *, run_id: int, lease_owner: str, status: str, error: str = "", step: int | None = None,
    data: dict[str, Any] | None = None, failure: str = "",
) -> bool:
    """End the run if we still hold its lease. `failure`: a failed run's class (Run.Failure),
    which decides whether it may resume; a failed run given none is unclassified."""
    if status == Run.Status.FAILED:
        failure = failure or Run.Failure.ERROR
        if failure not in Run.Failure.values:
            raise ValueError(f"unknown failure class {failure!r}; expected one of {Run.Failure.values}")
    else:
        failure = ""
    fields: dict[str, Any] = {
        "status": status, "error": error[:10_000], "finished_at": timezone.now(),
        "lease_owner": "", "cancel_requested": False, "failure": failure,
    }
    if step is not None:
        fields["step"] = step
    with transaction.atomic():
        changed = Run.objects.filter(
            pk=run_id, lease_owner=lease_owner, status=Run.Status.RUNNING
        ).update(**fields)
        if changed:
            RunEvent.objects.create(
                run_id=run_id, kind=status, message=error[:2000] or f"Run {status}.",
                data={**(data or {}), **({"failure": failure} if failure else {})},
            )
            run_notify_end(run_id=run_id, status=status, step=step, error=error)
            _ended(run_id)
    if changed:
        _announce(run_id, "status")
    return bool(changed)


def run_mark_stale_interrupted() -> int:
    """Runs whose worker stopped renewing the lease, and that nobody took over, are interrupted."""
    # Later than the takeover threshold: a redelivered task gets the first chance.
    cutoff = leases.interrupt_before()
    # External runs have no worker: their own threshold (webapp/runs/external.py).
    stale = list(
        Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=cutoff, external=False).values_list(
            "pk", flat=True
        )
    )
    marked = 0
    for run_id in stale:
        with transaction.atomic():
            changed = Run.objects.filter(
                pk=run_id, status=Run.Status.RUNNING, heartbeat_at__lt=cutoff, external=False
            ).update(
                status=Run.Status.INTERRUPTED, lease_owner="", finished_at=timezone.now(),
                cancel_requested=False,
                error="The worker stopped sending heartbeats; resume continues from the last checkpoint.",
            )
            if changed:
                marked += 1
                RunEvent.objects.create(run_id=run_id, kind="interrupted", message="Heartbeat went stale.")
                _ended(run_id)
        if changed:
            _announce(run_id, "status")
    return marked


new_lease_owner = leases.new_lease_owner
