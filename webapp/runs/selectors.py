"""Reads for runs: who sees what, metric series downsampled, rollouts by sequence."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import (
    Prefetch,
    QuerySet,
)
from django.shortcuts import get_object_or_404
from django.urls import reverse

from envs.adapters import episode_reward_rule
from webapp.catalog.models import Environment
from webapp.catalog.selectors import environments_visible_to
from webapp.core.users import owned_or_all, owner_or_permitted
from webapp.runs.models import Rollout, Run, RunEvent


def runs_visible_to(*, user: User | AnonymousUser) -> QuerySet[Run]:
    """A run is its owner's; users with the permission runs.view_run (or change_run) see all.

    Permissions, not `is_staff`: a staff account that may only open the admin reads nobody's
    transcripts. Everyone else gets a 404, as if the run did not exist.
    """
    return owned_or_all(Run.objects.select_related("owner"), user=user, view="runs.view_run", change="runs.change_run")


def run_can_change(*, user: User | AnonymousUser, run: Run) -> bool:
    """Cancel and resume: the run's owner, or a user with the permission runs.change_run."""
    return owner_or_permitted(user=user, owner_id=run.owner_id, change="runs.change_run")


RUN_CHANGE_REFUSAL = (
    "only the run's owner, or a user with the permission runs.change_run, may cancel or resume it"
)


def run_for(*, user: User | AnonymousUser, pk: int, change: bool = False) -> Run:
    """The run `pk` as `user` may reach it: Http404 when they cannot see it, and with `change`,
    PermissionDenied (RUN_CHANGE_REFUSAL) when they see it but may not cancel or resume it.
    Pages and the API (DRF turns both into its own 404 and 403) share this."""
    run = get_object_or_404(runs_visible_to(user=user), pk=pk)
    if change and not run_can_change(user=user, run=run):
        raise PermissionDenied(RUN_CHANGE_REFUSAL)
    return run


def run_rollouts(
    *,
    run: Run,
    step: int | None = None,
    env: str | None = None,
    after_seq: int | None = None,
    before_seq: int | None = None,
) -> QuerySet[Rollout]:
    """Oldest first; with `before_seq`, newest first below it (the run page's transcript
    list pages down from the top)."""
    rows = Rollout.objects.filter(run=run).order_by("seq" if before_seq is None else "-seq")
    if step is not None:
        rows = rows.filter(step=step)
    if env:
        rows = rows.filter(env=env)
    if after_seq is not None:
        rows = rows.filter(seq__gt=after_seq)
    if before_seq is not None:
        rows = rows.filter(seq__lt=before_seq)
    return rows


def run_rollout_steps(*, run: Run, through_seq: int) -> list[list[int]]:
    """[[step, rollouts], ...] newest step first, counting the rollouts stored up to
    `through_seq` (the run page's list sizes itself from these; later ones arrive live)."""
    from django.db.models import Count

    rows = (
        Rollout.objects.filter(run=run, seq__lte=through_seq)
        .values("step")
        .annotate(n=Count("id"))
        .order_by("-step")
    )
    return [[row["step"], row["n"]] for row in rows]


def run_environments(*, run: Run) -> list[dict[str, Any]]:
    """The run's environments as its config names them: the catalog entry, the reset options
    every episode sends, and what the episode reward (`env_reward`) is there."""
    items = [item for item in (run.config or {}).get("environments") or [] if isinstance(item, dict)]
    entries = Environment.objects.in_bulk([item.get("environment") for item in items])
    out = []
    for index, item in enumerate(items):
        entry = entries.get(item.get("environment"))
        rule, meaning = episode_reward_rule(entry) if entry is not None else ("", "")
        out.append({
            "name": item.get("name") or (f"env{index}" if len(items) > 1 else "env"),
            "environment": entry,
            "reset": item.get("reset") or {},
            "episode_reward": rule,
            "episode_reward_text": meaning,
        })
    return out


def run_environment_refusal(*, run: Run, environment_ids: list[int] | None = None) -> str:
    """Why the run's owner may no longer train on its environments (one that is not shared
    with them any more: security review N10), or "". `environment_ids` limits the check.
    The owner's own entries always stay theirs; a deactivated owner sees nothing, which says
    nothing about the environments, so their runs are not judged here."""
    if not run.owner.is_active:
        return ""
    visible = environments_visible_to(user=run.owner).values("pk")
    entries = run.environments.exclude(owner_id=run.owner_id).exclude(pk__in=visible)
    if environment_ids is not None:
        entries = entries.filter(pk__in=environment_ids)
    hidden = entries.order_by("pk").first()
    if hidden is None:
        return ""
    return f"the environment '{hidden.name}' is no longer shared with you"


def run_progress(*, run: Run) -> dict[str, Any]:
    """Step, elapsed seconds and an ETA from the average step time so far."""
    from django.utils import timezone

    elapsed = None
    eta = None
    if run.started_at:
        end = run.finished_at or timezone.now()
        elapsed = max(0.0, (end - run.started_at).total_seconds())
        if run.is_active and run.step > 0:
            eta = elapsed / run.step * max(0, run.max_steps - run.step)
    return {"step": run.step, "max_steps": run.max_steps, "elapsed_seconds": elapsed, "eta_seconds": eta}


def run_resumable(*, run: Run) -> tuple[bool, str]:
    """Whether `run` may resume from its last checkpoint, and why not ("" when it may).
    Interrupted and cancelled runs resume; a failed one only when its failure says nothing
    against the run itself (Run.RESUMABLE_FAILURES: a worker, machine, network or server that
    went away); a configuration, model or alert failure would fail again."""
    if run.external:
        return False, "an external run trains in its own script: start the script again, as a new run"
    if run.status in Run.RESUMABLE:
        return True, ""
    if run.status != Run.Status.FAILED:
        return False, f"only interrupted, cancelled or infrastructure-failed runs resume; this one is {run.status}"
    if run.failure in Run.RESUMABLE_FAILURES:
        return True, ""
    if not run.failure:
        return False, "this run failed before failures were classified, so it is not known to be safe to resume"
    label = Run.Failure(run.failure).label
    return False, f"this run's failure ({label.lower()}) would recur on a resume: fix it and launch a new run"


def run_alerts(*, run: Run) -> list[dict[str, Any]]:
    """The run's health alerts (webapp/runs/telemetry/health.py), one per kind and attempt, oldest first:
    `{kind, step, message, active}`. A new attempt ("started") re-checks from scratch, so
    what the previous attempt left active no longer is. Uses `run.health_events` when the
    caller prefetched it (`runs_with_alerts`)."""
    events = getattr(run, "health_events", None)
    if events is None:
        events = RunEvent.objects.filter(run=run, kind__in=HEALTH_EVENT_KINDS).order_by("created_at", "id")
    alerts: list[dict[str, Any]] = []
    open_alerts: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.kind == "started":
            for alert in open_alerts.values():
                alert["active"] = False
            open_alerts.clear()
            continue
        kind = str(event.data.get("alert", ""))
        if event.data.get("active", True):
            alert = {"kind": kind, "step": event.data.get("step"), "message": event.message, "active": True}
            open_alerts[kind] = alert
            alerts.append(alert)
        elif kind in open_alerts:
            open_alerts.pop(kind)["active"] = False
    return alerts


HEALTH_EVENT_KINDS = ("alert", "started")


def runs_with_alerts(runs: QuerySet[Run]) -> QuerySet[Run]:
    """`runs` with the events `run_alerts` reads prefetched: one query for a whole list."""
    return runs.prefetch_related(
        Prefetch(
            "events",
            queryset=RunEvent.objects.filter(kind__in=HEALTH_EVENT_KINDS).order_by("created_at", "id"),
            to_attr="health_events",
        )
    )


def run_status_display(*, run: Run, alerts: list[dict[str, Any]] | None = None) -> str:
    """The status as people read it: a run that succeeded with an alert still active
    "succeeded, with warnings"; `run.status` itself stays one of Run.Status."""
    if run.status == Run.Status.SUCCEEDED:
        if alerts is None:
            alerts = run_alerts(run=run)
        if any(alert["active"] for alert in alerts):
            return "succeeded, with warnings"
    return str(run.status)


def run_events(*, run: Run, after_id: int | None = None) -> QuerySet[RunEvent]:
    """The run's events by id, oldest first: a page that shows every event up to id N asks
    for those after it. Events of one run are written under the run's row lock (or by the
    one lease holder), so their ids commit in order and reading after N misses none."""
    rows = RunEvent.objects.filter(run=run).order_by("id")
    if after_id is not None:
        rows = rows.filter(pk__gt=after_id)
    return rows


def run_last_event_id(*, run_id: int) -> int:
    """The id of the run's newest event, 0 when it has none."""
    newest = RunEvent.objects.filter(run_id=run_id).order_by("-id").values_list("pk", flat=True).first()
    return int(newest or 0)


def run_live_note(*, run_id: int, kind: str = "facts") -> dict[str, Any] | None:
    """The notification a run's page gets when its status, facts or events changed: a few
    plain values; the page re-reads the run and its new events over REST
    (`GET /api/runs/<id>/`, `GET /api/runs/<id>/events/?after=<event>`). None: no such run."""
    run = Run.objects.filter(pk=run_id).only("pk", "status", "step").first()
    if run is None:
        return None
    return {
        "type": kind, "status": run.status, "status_display": run_status_display(run=run),
        "step": run.step, "event": run_last_event_id(run_id=run_id),
    }


def rollout_replay_url(rollout: Rollout) -> str:
    """The path of the rollout's replay page, drawn by webapp.evaluations.arena (what the API's `replay_url` carries)."""
    return reverse("rollout-replay", args=[rollout.run_id, rollout.seq])
