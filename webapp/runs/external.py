"""External runs: training that happens outside the lab (a TRL script with
envlab_client.trl.EnvlabCallback) and logs here over the API.

An external run has no task and no worker. It is running from the moment it is made, under a
lease the lab holds for it (a fresh `lease_owner` on the row, never shown): its logs go through
the worker's write path (webapp/runs/telemetry/record.py: seq numbers, a step logged again
replaces its values, live notes, the run-health rules over metrics), each write renews the heartbeat, and the stale-run sweep
interrupts it after ENVLAB_EXTERNAL_STALE_SECONDS without one. Every body is checked whole
before anything is written: a refused one changes no row.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from webapp.core import leases
from webapp.core.errors import InvalidInput, StateConflict
from webapp.runs.config import AlertSettings
from webapp.runs.labels import _single_line, run_tags_clean
from webapp.runs.models import MetricPoint, Run, RunEvent, RunTag
from webapp.runs.services import _announce, run_finish
from webapp.runs.telemetry.health import HealthMonitor
from webapp.runs.telemetry.live import notify_run
from webapp.runs.telemetry.record import Event, LeaseLost, telemetry_record

# A config is whatever the script sends (TRL's arguments as a dict, say), shown on the run page.
MAX_CONFIG_BYTES = 64 * 1024
MAX_CONFIG_DEPTH = 8
MAX_MODEL_CHARS = 500
# One log call: one step's metrics and at most one generation batch of rollouts.
MAX_METRICS = 500
MAX_KEY_CHARS = 200
MAX_ROLLOUTS = 256
MAX_ROLLOUT_BYTES = 256 * 1024
MAX_LOG_BYTES = 4 * 1024 * 1024
MAX_STEP = 2**31 - 1
MAX_ERROR_CHARS = 10_000
# Keys a rollout may carry (webapp/runs/telemetry/record.py `_rollout` reads these).
ROLLOUT_KEYS = frozenset({"prompt", "messages", "rewards", "reward", "advantage", "env", "seed", "episode"})
# Config keys the lab reads as references to its own rows (catalog entries): an external run
# names none of them, so its page cannot be made to show another account's environment.
RESERVED_CONFIG_KEYS = frozenset({"environments"})
FINISH_STATUSES = (Run.Status.SUCCEEDED, Run.Status.FAILED)


class ExternalRunRejected(InvalidInput):
    """An external run's body was refused; `errors` names each field to fix."""


class ExternalRunEnded(StateConflict):
    """The run is no longer running (finished, cancelled, interrupted): it takes no more logs."""


def _depth(value: Any, limit: int) -> bool:
    """Whether `value` nests no deeper than `limit` lists and objects."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return True


def _finite_json(value: Any) -> bool:
    """Whether every number in `value` is finite (NaN and infinities are not JSON)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass"))


def _external_config(value: Any) -> tuple[dict[str, Any], list[str]]:
    if value is None:
        return {}, []
    if not isinstance(value, dict):
        return {}, ["a JSON object (the script's settings, e.g. TrainingArguments.to_dict())"]
    reserved = sorted(RESERVED_CONFIG_KEYS & value.keys())
    if reserved:
        return {}, [f"{', '.join(reserved)}: names the lab's own environments; an external run's config may not use it"]
    if not _depth(value, MAX_CONFIG_DEPTH):
        return {}, [f"nested at most {MAX_CONFIG_DEPTH} levels deep"]
    if not _finite_json(value):
        return {}, ["numbers must be finite (no NaN or infinity)"]
    size = _json_size(value)
    if size > MAX_CONFIG_BYTES:
        return {}, [f"at most {MAX_CONFIG_BYTES} bytes as JSON (this one has {size})"]
    return value, []


def external_run_create(*, owner: User, data: Any) -> Run:
    """Make a running external run from {name, config?, tags?, model?, max_steps?}."""
    if not isinstance(data, dict):
        raise ExternalRunRejected({"non_field_errors": ['a JSON object: {"name": ..., "config": {...}, "tags": [...]}']})
    errors: dict[str, list[str]] = {}
    unknown = sorted(set(data) - {"name", "config", "tags", "model", "max_steps"})
    if unknown:
        errors["non_field_errors"] = [f"unknown field(s): {', '.join(map(str, unknown))}"]
    name, problems = _single_line("name", data.get("name"), 120, blank=False)
    if problems:
        errors["name"] = problems
    config, problems = _external_config(data.get("config"))
    if problems:
        errors["config"] = problems
    tags, problems = run_tags_clean(data.get("tags", []))
    if problems:
        errors["tags"] = problems
    model, problems = _single_line("model", data.get("model", ""), MAX_MODEL_CHARS, blank=True)
    if problems:
        errors["model"] = problems
    max_steps = data.get("max_steps", 0)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or not 0 <= max_steps <= MAX_STEP:
        errors["max_steps"] = [f"a whole number from 0 to {MAX_STEP} (0: not known)"]
    if errors:
        raise ExternalRunRejected(errors)
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner, name=name, config=config, model=model, max_steps=max_steps, external=True,
            queue="", status=Run.Status.RUNNING, lease_owner=leases.new_lease_owner(),
            heartbeat_at=now, started_at=now, attempts=1,
        )
        RunTag.objects.bulk_create([RunTag(run=run, slug=tag) for tag in tags])
        RunEvent.objects.create(run=run, kind="external_started", message="Run started outside the lab.")
    return run


def _number_errors(metrics: Any) -> tuple[dict[str, float], list[str]]:
    if not isinstance(metrics, dict) or not metrics:
        return {}, ['a non-empty JSON object of numbers: {"loss": 0.4, "reward": 1.0}']
    if len(metrics) > MAX_METRICS:
        return {}, [f"at most {MAX_METRICS} metrics in one log (this one has {len(metrics)})"]
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if not key or len(key) > MAX_KEY_CHARS or any(ord(ch) < 32 for ch in key):
            return {}, [f"metric names are 1 to {MAX_KEY_CHARS} characters without control characters: {key[:60]!r}"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return {}, [f"{key[:60]!r}: a finite number (got {str(value)[:40]!r})"]
        out[key] = float(value)
    return out, []


def _message_error(message: Any) -> str | None:
    """What is wrong with one chat message of a logged transcript, or None: it must be what the
    rollouts API's schema promises readers (webapp/runs/serializers.py TranscriptMessageOut)."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        return "each message is an object with a role (a string) and content"
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        parts_ok = isinstance(content, list) and all(
            isinstance(part, dict) and all(isinstance(part.get(key, ""), str) for key in ("type", "text"))
            for part in content
        )
        if not parts_ok:
            return "content is a string, null, or a list of parts {type, text} with string values"
    if not isinstance(message.get("name", ""), str):
        return "name is a string"
    calls = message.get("tool_calls", [])
    if not isinstance(calls, list):
        return "tool_calls is a list"
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments"), str | dict)
            or not all(isinstance(call.get(key, ""), str) for key in ("type", "id"))
        ):
            return "each tool call is {type, id, function: {name: string, arguments: object or JSON text}}"
    return None


def _rollout_errors(rollouts: Any) -> list[str]:
    if not isinstance(rollouts, list):
        return ["a list of rollouts: {prompt, messages, rewards: {term: number}, reward, advantage}"]
    if len(rollouts) > MAX_ROLLOUTS:
        return [f"at most {MAX_ROLLOUTS} rollouts in one log (this one has {len(rollouts)})"]
    for index, row in enumerate(rollouts):
        where = f"rollout {index}"
        if not isinstance(row, dict):
            return [f"{where}: a JSON object"]
        unknown = sorted(set(row) - ROLLOUT_KEYS)
        if unknown:
            return [f"{where}: unknown field(s) {', '.join(map(str, unknown))}; known: {', '.join(sorted(ROLLOUT_KEYS))}"]
        if not isinstance(row.get("messages", []), list) or not isinstance(row.get("prompt", []), list | str):
            return [f"{where}: messages is a list of chat messages, prompt a list of them or a string"]
        prompt = row.get("prompt", [])
        for part, messages in (("messages", row.get("messages", [])), ("prompt", prompt if isinstance(prompt, list) else [])):
            for number, message in enumerate(messages):
                problem = _message_error(message)
                if problem:
                    return [f"{where}: {part}[{number}]: {problem}"]
        rewards = row.get("rewards", {})
        if not isinstance(rewards, dict) or len(rewards) > MAX_METRICS:
            return [f"{where}: rewards is an object {{term: number}} of at most {MAX_METRICS} terms"]
        for term, value in rewards.items():
            if len(term) > MAX_KEY_CHARS:
                return [f"{where}: reward term names are at most {MAX_KEY_CHARS} characters"]
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                return [f"{where}: reward {term[:60]!r} is a number or null"]
        for field in ("reward", "advantage"):
            value = row.get(field)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                return [f"{where}: {field} is a number or null"]
        seed = row.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or abs(seed) >= 2**63):
            return [f"{where}: seed is a whole number or null"]
        if not isinstance(row.get("env", ""), str) or len(row.get("env", "")) > 64:
            return [f"{where}: env is a name of at most 64 characters"]
        if not _depth(row, MAX_CONFIG_DEPTH + 4) or not _finite_json(row):
            return [f"{where}: nested at most {MAX_CONFIG_DEPTH + 4} levels, numbers finite"]
        size = _json_size(row)
        if size > MAX_ROLLOUT_BYTES:
            return [f"{where}: at most {MAX_ROLLOUT_BYTES} bytes as JSON (this one has {size})"]
    return []


def external_run_log(*, run: Run, data: Any) -> dict[str, Any]:
    """Record one step of an external run: {step, metrics, rollouts?}. Returns {seq, step,
    rollouts}. A step logged again replaces its values (as a resumed worker's does)."""
    if run.external is not True:
        raise ExternalRunEnded("only an external run (POST /api/runs/external/) takes logs over the API")
    if not isinstance(data, dict):
        raise ExternalRunRejected({"non_field_errors": ['a JSON object: {"step": 1, "metrics": {...}, "rollouts": [...]}']})
    errors: dict[str, list[str]] = {}
    unknown = sorted(set(data) - {"step", "metrics", "rollouts"})
    if unknown:
        errors["non_field_errors"] = [f"unknown field(s): {', '.join(map(str, unknown))}"]
    step = data.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        errors["step"] = [f"a whole number from 0 to {MAX_STEP}"]
    metrics, problems = _number_errors(data.get("metrics"))
    if problems:
        errors["metrics"] = problems
    rollouts = data.get("rollouts") or []
    problems = _rollout_errors(rollouts)
    if problems:
        errors["rollouts"] = problems
    if not errors and _json_size(data) > MAX_LOG_BYTES:
        errors["non_field_errors"] = [f"one log is at most {MAX_LOG_BYTES} bytes as JSON"]
    if errors:
        raise ExternalRunRejected(errors)
    assert isinstance(step, int)
    events: list[Event] = [("metrics", (step, metrics))]
    events += [("alert", alert) for alert in _health_alerts(run=run, step=step, metrics=metrics)]
    if rollouts:
        events.append(("rollouts", [{**row, "step": step} for row in rollouts]))
    lease_owner = Run.objects.filter(pk=run.pk).values_list("lease_owner", flat=True).first() or ""
    try:
        with transaction.atomic():
            notes = telemetry_record(run_id=run.pk, lease_owner=lease_owner, events=events)
            leases.renew(Run, pk=run.pk, lease_owner=lease_owner)
    except LeaseLost:
        status = Run.objects.filter(pk=run.pk).values_list("status", flat=True).first()
        raise ExternalRunEnded(f"the run has ended ({status}): it takes no more logs") from None
    for note in notes:  # after the commit: the database is the truth, the note a hint
        notify_run(run.pk, note)
    seq = max((note["seq"] for note in notes if "seq" in note), default=0)
    return {"seq": seq, "step": step, "rollouts": len(rollouts)}


# What the metric rules of the run-health monitor read (webapp/runs/telemetry/health.py).
HEALTH_KEYS = (
    "loss", "grad_norm", "frac_reward_zero_std", "tools/call_frequency", "tools/failure_frequency", "reward", "entropy",
)
MAX_HEALTH_WINDOW = 200


def _health_alerts(*, run: Run, step: int, metrics: dict[str, float]) -> list[dict[str, Any]]:
    """The health alerts raised or cleared at `step`, as the worker's monitor would raise them.

    The web process keeps no monitor between requests: it replays one over the run's last
    logged steps (enough for every rule's streak), the new values at `step` included, and keeps
    what the last step changed. The rules over metrics apply; those over tool transcripts and
    group starts, and stopping a run on an alert, need the lab's trainer and do not. An alert
    already recorded at this step (the step logged again) is not recorded twice."""
    try:
        alert_settings = AlertSettings.model_validate((run.config or {}).get("alerts") or {})
    except (ValidationError, AttributeError):  # the script's config, not the lab's: defaults
        alert_settings = AlertSettings()
    if not alert_settings.enabled:
        return []
    window = min(MAX_HEALTH_WINDOW, 1 + max(
        alert_settings.zero_variance_steps, alert_settings.tool_failure_steps, alert_settings.no_tool_calls_steps,
        alert_settings.reward_flat_steps, alert_settings.entropy_steps,
    ))
    earlier = list(
        MetricPoint.objects.filter(run_id=run.pk, key__in=HEALTH_KEYS, step__lt=step)
        .values_list("step", flat=True).distinct().order_by("-step")[:window]
    )
    logged: dict[int, dict[str, Any]] = {s: {} for s in sorted(earlier)}
    rows = MetricPoint.objects.filter(run_id=run.pk, key__in=HEALTH_KEYS, step__in=[*earlier, step])
    for at, key, value in rows.values_list("step", "key", "value"):
        logged.setdefault(at, {})[key] = value
    logged.setdefault(step, {}).update({k: v for k, v in metrics.items() if k in HEALTH_KEYS})
    monitor = HealthMonitor(alert_settings, tool_env=False)
    changes = []
    for at in sorted(logged):
        changes = monitor.observe(at, logged[at])
    recorded = {
        (event["alert"], event["active"])
        for event in RunEvent.objects.filter(run_id=run.pk, kind="alert", data__step=step).values_list("data", flat=True)
        if isinstance(event, dict)
    }
    return [alert.as_event() for alert in changes if (alert.kind, alert.active) not in recorded]


def external_run_finish(*, run: Run, data: Any) -> Run:
    """End an external run: {status?: "succeeded" | "failed", error?}. 409 once it has ended."""
    if run.external is not True:
        raise ExternalRunEnded("only an external run is finished over the API; the lab's own runs end themselves")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ExternalRunRejected({"non_field_errors": ['a JSON object: {"status": "succeeded"} or {}']})
    errors: dict[str, list[str]] = {}
    unknown = sorted(set(data) - {"status", "error"})
    if unknown:
        errors["non_field_errors"] = [f"unknown field(s): {', '.join(map(str, unknown))}"]
    status = data.get("status", Run.Status.SUCCEEDED)
    if status not in FINISH_STATUSES:
        errors["status"] = [f"one of {', '.join(FINISH_STATUSES)}"]
    error = data.get("error", "")
    if not isinstance(error, str) or len(error) > MAX_ERROR_CHARS:
        errors["error"] = [f"text of at most {MAX_ERROR_CHARS} characters"]
    if errors:
        raise ExternalRunRejected(errors)
    lease_owner = Run.objects.filter(pk=run.pk).values_list("lease_owner", flat=True).first() or ""
    ended = bool(lease_owner) and run_finish(
        run_id=run.pk, lease_owner=lease_owner, status=status, error=error,
        failure=Run.Failure.ERROR if status == Run.Status.FAILED else "",
    )
    if not ended:
        status_now = Run.objects.filter(pk=run.pk).values_list("status", flat=True).first()
        raise ExternalRunEnded(f"the run has already ended ({status_now})")
    return Run.objects.get(pk=run.pk)


def external_runs_mark_stale() -> int:
    """External runs that logged nothing for ENVLAB_EXTERNAL_STALE_SECONDS are interrupted
    (the sweep of stale runs calls this; the lab's own runs follow their workers' heartbeats)."""
    cutoff = timezone.now() - timedelta(seconds=settings.ENVLAB_EXTERNAL_STALE_SECONDS)
    stale = list(
        Run.objects.filter(external=True, status=Run.Status.RUNNING, heartbeat_at__lt=cutoff).values_list("pk", flat=True)
    )
    marked = 0
    for run_id in stale:
        with transaction.atomic():
            changed = Run.objects.filter(
                pk=run_id, external=True, status=Run.Status.RUNNING, heartbeat_at__lt=cutoff
            ).update(
                status=Run.Status.INTERRUPTED, lease_owner="", finished_at=timezone.now(),
                error=(
                    f"The script logged nothing for {settings.ENVLAB_EXTERNAL_STALE_SECONDS:g} seconds "
                    "(ENVLAB_EXTERNAL_STALE_SECONDS): it stopped, or lost the lab."
                ),
            )
            if changed:
                marked += 1
                RunEvent.objects.create(run_id=run_id, kind="interrupted", message="The external run went quiet.")
                _announce(run_id, "status")
    return marked
