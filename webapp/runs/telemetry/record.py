"""Recording telemetry: metrics and rollouts get per-run sequence numbers and are stored
in one transaction, only for the worker that holds the run's lease. The worker's sink
calls this from its background flusher."""

from __future__ import annotations

import math
from typing import Any

from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest

from envs.adapters.tool_metrics import safe_tool_name, tool_results
from webapp.core.transcripts import cap_transcript
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent, prompt_key
from webapp.runs.selectors import run_last_event_id
from webapp.runs.telemetry.metric_keys import canonical_metric_key, stored_metric_key
from webapp.runs.telemetry.notify import run_notify_alert


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


# ("metrics", (step, {key: value})), ("rollouts", [row, ...]), ("alert", {kind, step, message, active})
# or ("event", {kind, message, data}): a run event the worker raises in order with its telemetry
# (a checkpoint that could not be saved, one left half-written and removed).
RUN_EVENT_KINDS = ("checkpoint_failed", "checkpoint_incomplete")
Event = tuple[str, Any]


class LeaseLost(Exception):
    """The writer no longer holds the run's lease: another worker trains it, or it ended."""


@transaction.atomic
def telemetry_record(
    *, run_id: int, lease_owner: str, events: list[Event], chunk: str = ""
) -> list[dict[str, Any]]:
    """Store events in the order given, numbering them; return the notifications to publish.

    A step recorded twice (a step redone after a resume) replaces the earlier values.
    Raises LeaseLost, writing nothing, unless `lease_owner` holds the running run's lease:
    the lease is checked on the row this transaction locks, so a takeover (which rewinds
    the run) cannot interleave with a zombie worker's write.

    `chunk`: the writer's token for these events, the same when it retries them. The writer
    writes one chunk at a time, so a token equal to the last one stored is a retry of a write
    that committed (its answer was lost): nothing is stored again and nothing is announced.
    """
    run = (
        Run.objects.select_for_update()
        .only("pk", "last_seq", "telemetry_chunk")
        .filter(pk=run_id, lease_owner=lease_owner, status=Run.Status.RUNNING)
        .exclude(lease_owner="")
        .first()
    )
    if run is None:
        raise LeaseLost(f"run {run_id}: this worker no longer holds the lease")
    if chunk and run.telemetry_chunk == chunk[:64]:
        return []
    seq = run.last_seq
    notes: list[dict[str, Any]] = []
    # By (step, key): a step logged twice within one write (TRL's end-of-training summary at
    # the last step, or a backlog written after an outage) keeps its later value, as separate
    # writes would; PostgreSQL refuses an upsert that names one row twice.
    points: dict[tuple[int, str], MetricPoint] = {}
    rollouts: list[Rollout] = []
    alerts: list[RunEvent] = []  # run health (webapp/runs/telemetry/health.py) and run events, in the order raised
    last_step = 0
    shortened: dict[str, str] = {}  # stored key -> the full name it stands for
    for kind, payload in events:
        if kind == "metrics":
            step, values = payload
            seq += 1
            clean: dict[str, float] = {}
            for k, v in values.items():
                number = _number(v)
                if number is None:
                    continue
                name = canonical_metric_key(storable(str(k)))
                key = stored_metric_key(name)
                if key != name:
                    shortened[key] = name
                if key in clean and name != k:
                    continue  # both spellings in one log: the GRPO-named value stands
                clean[key] = number
            for k, v in clean.items():
                points[(step, k)] = MetricPoint(run_id=run_id, step=step, key=k, value=v, seq=seq)
            notes.append({"type": "metrics", "seq": seq, "step": step, "values": clean})
            last_step = max(last_step, step)
        elif kind == "alert":
            alerts.append(RunEvent(
                run_id=run_id, kind="alert", message=storable(str(payload.get("message", ""))[:2000]),
                data={
                    "alert": str(payload.get("kind", ""))[:32], "step": int(payload.get("step") or 0),
                    "active": bool(payload.get("active", True)),
                },
            ))
        elif kind == "event":
            if payload.get("kind") not in RUN_EVENT_KINDS:
                raise ValueError(f"not a run event the worker may record: {payload.get('kind')!r}")
            alerts.append(RunEvent(
                run_id=run_id, kind=payload["kind"], message=storable(str(payload.get("message", ""))[:2000]),
                data=storable(payload.get("data") or {}),
            ))
        elif kind == "rollouts" and payload:
            first = seq + 1
            for item in payload:
                seq += 1
                rollouts.append(_rollout(run_id, seq, item))
            notes.append({
                "type": "rollouts", "seq": seq, "first_seq": first, "count": len(payload),
                "step": rollouts[-1].step,
            })
    if points:
        MetricPoint.objects.bulk_create(
            list(points.values()), update_conflicts=True, unique_fields=["run", "step", "key"], update_fields=["value", "seq"]
        )
    lost_events = False
    if rollouts:
        Rollout.objects.bulk_create(rollouts)
        reasons = sorted({
            storable(str(item.get("lost_reason") or "")[:500])
            for kind, payload in events if kind == "rollouts"
            for item in payload if item.get("lost") and item.get("lost_reason")
        })
        lost = [r for r in rollouts if r.unscored]
        if lost:
            envs = sorted({r.env for r in lost})
            RunEvent.objects.create(
                run_id=run_id, kind="episode_lost",
                message=(
                    f"{len(lost)} episode(s) in {', '.join(envs)} lost at step {lost[0].step}: the environment "
                    "server no longer held them (restarted?). Those rollouts are unscored."
                ),
                data={"step": lost[0].step, "envs": envs, "seqs": [r.seq for r in lost], "reasons": reasons[:5]},
            )
            lost_events = True
    if shortened:
        alerts += _shortened_key_events(run_id, shortened)
    if alerts:
        RunEvent.objects.bulk_create(alerts)
        for event in alerts:
            if event.kind == "alert" and event.data["active"]:
                run_notify_alert(
                    run_id=run_id, alert=event.data["alert"], step=event.data["step"], message=event.message
                )
    if alerts or lost_events:
        # The run page lists events and shows the alert banner: it re-reads them over REST.
        notes.append({"type": "facts", "event": run_last_event_id(run_id=run_id)})
    Run.objects.filter(pk=run_id).update(
        last_seq=seq, step=Greatest(F("step"), Value(last_step)), telemetry_chunk=chunk[:64]
    )
    return notes


METRIC_KEY_SHORTENED = "metric_key_shortened"


def _shortened_key_events(run_id: int, shortened: dict[str, str]) -> list[RunEvent]:
    """One event per long metric name and run, the first time it is logged: it says which
    stored key holds it. The full name is kept to 2000 characters (the event's message)."""
    known = set(
        RunEvent.objects.filter(run_id=run_id, kind=METRIC_KEY_SHORTENED).values_list("data__key", flat=True)
    )
    return [
        RunEvent(
            run_id=run_id, kind=METRIC_KEY_SHORTENED,
            message=(
                f"metric '{name[:2000]}' is longer than {len(key)} characters: stored as '{key}'"
            ),
            data={"key": key, "name": name[:2000]},
        )
        for key, name in sorted(shortened.items())
        if key not in known
    ]


def storable(value: Any) -> Any:
    """Model and environment text as every database takes it: PostgreSQL refuses NUL
    characters in text and JSON, which a tiny model's output can contain. Replaced by
    U+FFFD, so the transcript still shows that something was there."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {storable(str(k)): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def _rollout(run_id: int, seq: int, item: dict[str, Any]) -> Rollout:
    env = storable(str(item.get("env", ""))[:64])
    prompt = storable(item.get("prompt", []))
    messages = cap_transcript(storable(item.get("messages", [])))
    tools = rollout_tool_summary(messages)
    seed = item.get("seed")
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) and abs(seed) < 2**63 else None
    return Rollout(
        run_id=run_id, seq=seq, step=int(item["step"]), env=env,
        seed=seed, prompt_key=prompt_key(env, prompt, seed),
        prompt=prompt, messages=messages,
        rewards={storable(str(k)): _number(v) for k, v in item.get("rewards", {}).items()},
        reward=_number(item.get("reward")), advantage=_number(item.get("advantage")),
        unscored=bool(item.get("lost", False)),
        episode=_episode_facts(item.get("episode")),
        tools=tools, tool_failures=sum(facts["failures"] for facts in tools.values()),
    )


def rollout_tool_summary(messages: Any) -> dict[str, dict[str, int]]:
    """{tool name: {"calls": results, "failures": failed results}} of one transcript, the
    names as the tool metrics key them (model text made safe)."""
    summary: dict[str, dict[str, int]] = {}
    for result in tool_results(messages):
        facts = summary.setdefault(safe_tool_name(result.name), {"calls": 0, "failures": 0})
        facts["calls"] += 1
        facts["failures"] += int(result.error is not None)
    return summary


def _episode_facts(value: Any) -> dict[str, Any]:
    """The scored episode's attributes, components and sizes as the worker sent them, with
    every number finite and every name a string (webapp/workbench/rescore reads them back)."""
    if not isinstance(value, dict):
        return {}
    attributes = value.get("attributes")
    components = value.get("components")
    out: dict[str, Any] = {
        "attributes": {
            storable(str(k)): n for k, v in (attributes.items() if isinstance(attributes, dict) else [])
            if (n := _number(v)) is not None
        },
        "components": {
            storable(str(name)): {storable(str(k)): n for k, v in table.items() if (n := _number(v)) is not None}
            for name, table in (components.items() if isinstance(components, dict) else [])
            if isinstance(table, dict)
        },
    }
    for size in ("completion_tokens", "completion_chars"):
        number = value.get(size)
        out[size] = number if isinstance(number, int) and not isinstance(number, bool) and number >= 0 else None
    return out
