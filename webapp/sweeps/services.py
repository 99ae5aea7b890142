"""Writes for sweeps: create one (every member checked up front, all its runs in one
transaction), release pending members into free quota slots, cancel the rest."""

from __future__ import annotations

import copy
import secrets
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from webapp.core.errors import InvalidInput
from webapp.core.quota import lock_owner
from webapp.runs.config import RunConfigError, parse_run_config
from webapp.runs.models import Run
from webapp.runs.services import (
    LaunchPlan,
    run_cancel_pending,
    run_create,
    run_launch_plan,
    run_release,
    run_slots_free,
)
from webapp.sweeps.grid import (
    MAX_MEMBERS,
    PathError,
    config_set,
    grid_errors,
    grid_members,
    grid_size,
)
from webapp.sweeps.models import NAME_MAX_LENGTH, Sweep, SweepMember

# Pending runs one account may hold over all its sweeps: rows that wait, not work, but rows.
MAX_PENDING_PER_OWNER = 256
FIELDS = ("name", "base", "grid", "method", "count", "seed")


class SweepRejected(InvalidInput):
    """A sweep that is refused; nothing was written."""


@dataclass(frozen=True)
class SweepSpec:
    name: str
    base: dict[str, Any]
    grid: dict[str, list[Any]]
    method: str
    count: int | None
    seed: int | None


def _name_errors(name: Any) -> list[str]:
    if not isinstance(name, str):
        return ["the sweep's name must be a string"]
    if len(name.strip()) > NAME_MAX_LENGTH:
        return [f"at most {NAME_MAX_LENGTH} characters (this one has {len(name.strip())})"]
    if any(ord(ch) < 32 for ch in name):
        return ["one line of text, without control characters"]
    return []


def sweep_spec(data: Any) -> SweepSpec:
    """The request's shape checked (not yet the members' configs); raises SweepRejected."""
    if not isinstance(data, dict):
        raise SweepRejected({"non_field_errors": ['a JSON object with "base" and "grid"']})
    errors: dict[str, list[str]] = {}
    unknown = sorted(str(key) for key in data if key not in FIELDS)
    if unknown:
        errors["non_field_errors"] = [f"a sweep takes {', '.join(FIELDS)}; not {', '.join(unknown)}"]
    name = data.get("name", "")
    if name_problems := _name_errors(name):
        errors["name"] = name_problems
    base = data.get("base")
    if not isinstance(base, dict):
        errors["base"] = ["the run config every member starts from, as POST /api/runs/ takes it"]
    grid = data.get("grid")
    errors.update(grid_errors(grid))
    method = data.get("method", Sweep.Method.GRID)
    if method not in Sweep.Method.values:
        errors["method"] = [f"one of {', '.join(Sweep.Method.values)}"]
    count, seed = data.get("count"), data.get("seed")
    if method == Sweep.Method.RANDOM:
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            errors["count"] = ["a random sweep draws `count` members: a whole number of at least 1"]
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**31):
            errors["seed"] = ["a whole number from 0 to 2147483647 (left out: one is drawn and stored)"]
    elif count is not None or seed is not None:
        errors["count" if count is not None else "seed"] = ['only a "random" sweep takes count and seed']
    if errors:
        raise SweepRejected(errors)
    assert isinstance(base, dict)
    assert isinstance(grid, dict)
    size = grid_size(grid)
    members = size if method == Sweep.Method.GRID else count
    assert members is not None
    if method == Sweep.Method.RANDOM and members > size:
        raise SweepRejected({"count": [f"the grid has {size} combinations: a random sweep draws at most that many"]})
    if members > MAX_MEMBERS:
        shape = " x ".join(str(len(values)) for values in grid.values())
        raise SweepRejected({"grid" if method == Sweep.Method.GRID else "count": [
            f"a sweep has at most {MAX_MEMBERS} members; this one has {members}"
            + (f" ({shape})" if method == Sweep.Method.GRID else "")
        ]})
    if method == Sweep.Method.RANDOM and seed is None:
        seed = secrets.randbelow(2**31)
    return SweepSpec(name=name.strip(), base=base, grid=grid, method=method, count=count if method == Sweep.Method.RANDOM else None, seed=seed)


def _member_name(sweep_name: str, index: int) -> str:
    suffix = f" #{index}"
    return sweep_name[: 120 - len(suffix)] + suffix


def _member_plans(*, owner: User, spec: SweepSpec, name: str) -> list[tuple[dict[str, Any], LaunchPlan]]:
    """Every member's config checked as a launch checks it (schema first, for all of them,
    then the checks that probe environments); raises SweepRejected with each error under
    `members.<index>.<field>`."""
    errors: dict[str, list[str]] = {}
    for path, values in spec.grid.items():
        try:
            config_set(copy.deepcopy(spec.base), path, values[0])
        except PathError as exc:
            errors[f"grid.{path}"] = [str(exc)]
    if errors:
        raise SweepRejected(errors)
    members = grid_members(spec.grid, method=spec.method, count=spec.count, seed=spec.seed)
    configs = []
    for index, params in enumerate(members):
        data = copy.deepcopy(spec.base)
        for path, value in params.items():
            config_set(data, path, value)
        data["name"] = _member_name(name, index)
        try:
            configs.append((params, parse_run_config(data)))
        except RunConfigError as exc:
            errors.update({f"members.{index}.{key}": messages for key, messages in exc.errors.items()})
    if errors:
        raise SweepRejected(errors)
    plans = []
    for index, (params, config) in enumerate(configs):
        try:
            plans.append((params, run_launch_plan(owner=owner, config=config)))
        except RunConfigError as exc:
            errors.update({f"members.{index}.{key}": messages for key, messages in exc.errors.items()})
    if errors:
        raise SweepRejected(errors)
    return plans


def sweep_create(*, owner: User, data: Any) -> Sweep:
    """Check every member up front, then make the sweep and all its runs in one transaction,
    each run pending, and queue as many as the owner's quota has slots for (the rest are
    released as runs end: `sweep_release`). A refused sweep writes nothing."""
    spec = sweep_spec(data)
    # The member names need the sweep's name; an unnamed sweep is named by its id below.
    provisional = spec.name or "sweep"
    plans = _member_plans(owner=owner, spec=spec, name=provisional)
    with transaction.atomic():
        lock_owner(owner)
        pending = Run.objects.filter(owner=owner, status=Run.Status.PENDING).count()
        if pending + len(plans) > MAX_PENDING_PER_OWNER:
            raise SweepRejected({"non_field_errors": [
                f"you have {pending} runs pending in sweeps, and one account may have at most "
                f"{MAX_PENDING_PER_OWNER}: wait for them, or cancel the rest of a sweep"
            ]})
        sweep = Sweep.objects.create(
            owner=owner, name=spec.name, base=spec.base, grid=spec.grid, paths=list(spec.grid), method=spec.method,
            count=spec.count, seed=spec.seed,
        )
        if not spec.name:
            sweep.name = f"sweep-{sweep.pk}"
            sweep.save(update_fields=["name"])
        waiting = f"Pending in sweep '{sweep.name}' (#{sweep.pk}): queued when a slot of your quota is free."
        for index, (params, plan) in enumerate(plans):
            plan.config.name = _member_name(sweep.name, index)
            run = run_create(owner=owner, plan=plan, group=sweep.name, pending=waiting)
            SweepMember.objects.create(sweep=sweep, run=run, index=index, params=params)
        _release(owner)
    return sweep


def _release(owner: User) -> list[int]:
    """In the caller's transaction: queue the owner's oldest pending members into the slots free."""
    lock_owner(owner)
    released: list[int] = []
    free = run_slots_free(owner)
    if free > 0:
        waiting = (
            SweepMember.objects.filter(
                sweep__owner=owner, sweep__status=Sweep.Status.ACTIVE, run__status=Run.Status.PENDING
            )
            .order_by("sweep_id", "index")
            .values_list("run_id", "sweep_id", "sweep__name", "index")
        )
        for run_id, sweep_id, name, index in waiting[:free]:
            message = f"Queued from sweep '{name}' (#{sweep_id}, member {index}): a slot of your quota was free."
            if run_release(run_id=run_id, message=message, data={"sweep": sweep_id, "member": index}):
                released.append(run_id)
    _sweeps_mark_done(owner)
    return released


def _sweeps_mark_done(owner: User) -> None:
    going = Run.objects.filter(sweep_member__sweep=OuterRef("pk"), status__in=Run.NOT_ENDED)
    now = timezone.now()
    Sweep.objects.filter(owner=owner, status=Sweep.Status.ACTIVE).exclude(Exists(going)).update(
        status=Sweep.Status.DONE, finished_at=now
    )
    # A sweep whose rest was cancelled ends when its last running member does.
    Sweep.objects.filter(owner=owner, status=Sweep.Status.CANCELLED, finished_at=None).exclude(
        Exists(going)
    ).update(finished_at=now)


def sweep_release(*, owner_id: int) -> list[int]:
    """Queue the owner's pending sweep members that their quota has room for now, oldest sweep
    first and in member order; returns the ids queued. Idempotent and safe to run
    concurrently: the owner's row is locked for the transaction, and each run is moved from
    pending by a conditional UPDATE."""
    owner = get_user_model().objects.filter(pk=owner_id).first()
    if owner is None:
        return []
    with transaction.atomic():
        return _release(owner)


def sweeps_release_all() -> list[int]:
    """`sweep_release` for every owner with a pending member (beat: slots freed by evaluations
    and jobs ending, or a run end whose receiver failed)."""
    owners = (
        SweepMember.objects.filter(sweep__status=Sweep.Status.ACTIVE, run__status=Run.Status.PENDING)
        .values_list("sweep__owner_id", flat=True).distinct().order_by()
    )
    released: list[int] = []
    for owner_id in list(owners):
        released += sweep_release(owner_id=owner_id)
    return released


def sweep_cancel_rest(*, sweep: Sweep) -> list[int]:
    """Cancel the sweep's members still pending, each with an event saying why; queued and
    running ones go on. Returns the ids cancelled (none the second time)."""
    cancelled: list[int] = []
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().get(pk=sweep.pk)
        pending = SweepMember.objects.filter(sweep=sweep, run__status=Run.Status.PENDING).order_by("index")
        for run_id, index in pending.values_list("run_id", "index"):
            message = f"Cancelled before it started: the rest of sweep '{sweep.name}' (#{sweep.pk}) was cancelled."
            data = {"reason": "sweep_cancel_rest", "sweep": sweep.pk, "member": index}
            if run_cancel_pending(run_id=run_id, message=message, data=data):
                cancelled.append(run_id)
        if sweep.status == Sweep.Status.ACTIVE:
            sweep.status = Sweep.Status.CANCELLED
            if not Run.objects.filter(sweep_member__sweep=sweep, status__in=Run.NOT_ENDED).exists():
                sweep.finished_at = timezone.now()
            sweep.save(update_fields=["status", "finished_at"])
    return cancelled
