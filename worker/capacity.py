"""What a session refusal (CAPACITY_REACHED) teaches the catalog: the server's stated limit
is stored on its Environment row (webapp.catalog.services.environment_capacity_learned), so
the next launch whose batch is larger is refused at launch, not after minutes of loading."""

from __future__ import annotations

import logging

from django.db import DatabaseError

from envs.adapters.base import EnvironmentAtCapacity
from webapp.catalog.services import environment_capacity_learned
from webapp.runs.config import RunConfig

log = logging.getLogger(__name__)


def capacity_refusal(exc: BaseException | None) -> EnvironmentAtCapacity | None:
    """The refusal behind `exc`: itself, or what it was raised from (TRL's pools may wrap it)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, EnvironmentAtCapacity):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def learn_capacity(
    *, refusal: EnvironmentAtCapacity, environment_id: int, run_id: int | None = None,
    step: int | None = None, phase: str = "", evaluation_id: int | None = None,
) -> bool:
    """Store the refusal's limit on the row. Never raises: the run or evaluation is failing
    already, and its own end must still be recorded."""
    if refusal.capacity is None:
        return False  # the server did not say: nothing learned
    try:
        return environment_capacity_learned(
            environment_id=environment_id, capacity=refusal.capacity, run_id=run_id, step=step,
            phase=phase, evaluation_id=evaluation_id,
        )
    except DatabaseError:
        log.exception("environment %s: the capacity its refusal stated was not stored", environment_id)
        return False


def run_learn_capacity(*, exc: BaseException, config: RunConfig, run_id: int, step: int | None, phase: str) -> bool:
    """Where a run failed on a refusal: store the limit on the refusing environment's row,
    found by its name within the run (the adapter's `env_name`)."""
    refusal = capacity_refusal(exc)
    if refusal is None:
        return False
    item = next((item for item in config.environments if item.name == refusal.env_name), None)
    if item is None and len(config.environments) == 1:
        item = config.environments[0]
    if item is None:
        log.warning("run %s: a refusal from '%s', which is none of its environments", run_id, refusal.env_name)
        return False
    return learn_capacity(refusal=refusal, environment_id=item.environment, run_id=run_id, step=step, phase=phase)
