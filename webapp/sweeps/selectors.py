"""Reads for sweeps: who sees one, its members with status, the parameters that differ between
them, and a chosen metric's summary per member (the runs table's summary code)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from webapp.core.users import owned_or_all, owner_or_permitted
from webapp.runs.models import Run
from webapp.runs.table import runs_metric_summaries
from webapp.sweeps.grid import config_paths, differing_paths
from webapp.sweeps.models import Sweep, SweepMember

SUMMARY_STATS = ("last", "max", "min")
DEFAULT_METRIC = "reward"


def sweeps_visible_to(*, user: User | AnonymousUser) -> QuerySet[Sweep]:
    """As runs (webapp.runs.selectors.runs_visible_to): the owner's, or every one for a user with
    the permission runs.view_run (or change_run); everyone else gets a 404."""
    return owned_or_all(Sweep.objects.select_related("owner"), user=user, view="runs.view_run", change="runs.change_run")


def sweep_can_change(*, user: User | AnonymousUser, sweep: Sweep) -> bool:
    """Cancel the rest: the sweep's owner, or a user with the permission runs.change_run."""
    return owner_or_permitted(user=user, owner_id=sweep.owner_id, change="runs.change_run")


def sweep_status_counts(*, sweep: Sweep) -> dict[str, int]:
    """{run status: members in it}, statuses with none left out."""
    statuses = Run.objects.filter(sweep_member__sweep=sweep).values_list("status", flat=True)
    return dict(sorted(Counter(statuses).items()))


def sweep_table(*, sweep: Sweep, metric: str = DEFAULT_METRIC) -> dict[str, Any]:
    """{"paths": the config paths whose value differs between members (in config order), "metric",
    "members": [{index, run, name, status, step, max_steps, params: {path: value}, summary:
    {last, max, min, step} or None}]} in member order. `params` is read from each run's stored
    config, so it shows what the run trains with."""
    members = list(
        SweepMember.objects.filter(sweep=sweep).order_by("index")
        .values_list("index", "run_id", "run__name", "run__status", "run__step", "run__max_steps", "run__config")
    )
    differing = set(differing_paths([row[6] for row in members]))
    # The swept paths in the grid's order, then any other that differs (one a swept field
    # changed, a checkpoint pinned at launch), by name: stored configs keep no key order.
    paths = [path for path in sweep.paths if path in differing]
    paths += sorted(differing.difference(paths))
    summaries = runs_metric_summaries(run_ids=[row[1] for row in members], keys=[metric])
    rows = []
    for index, run_id, name, status, step, max_steps, config in members:
        flat = config_paths(config)
        rows.append({
            "index": index, "run": run_id, "name": name, "status": status, "step": step, "max_steps": max_steps,
            "params": {path: flat.get(path) for path in paths},
            "summary": summaries.get(run_id, {}).get(metric),
        })
    return {"paths": paths, "metric": metric, "members": rows}
