"""A recipe's learnability card (webapp/workbench/learnability.py): the SAME seeded rows played
once by the environment's solver and once by the random valid policy, on the adapter TRL would
get, each episode scored by the recipe as the dry run scores it (worker/play/dry_run.py)."""

from __future__ import annotations

from typing import Any

from envs.solvers import RANDOM, SOLVER, policy_for
from webapp.jobs.models import Job
from webapp.workbench.learnability import learnability_report, recipe_bounds
from worker.episodes import disconnect, stated_iterations, tool_schemas
from worker.play.dry_run import ENV_NAME, _Beat, job_setup, play_scored
from worker.play.jobs import LeaseLost, job_progress

POLICIES = (SOLVER, RANDOM)


def learnability(job: Job, lease_owner: str) -> dict[str, Any]:
    params = job.params
    key = str(params["environment_key"] or "")
    terms, names, adapter, rows = job_setup(job, int(params["episodes"]))
    scores: dict[str, list[dict[str, float | None]]] = {kind: [] for kind in POLICIES}
    done = 0
    beat = _Beat(job.pk, lease_owner)
    beat.start()
    try:
        schemas = tool_schemas(adapter)
        # A learnability job states no cap: both policies play under the one a model gets by
        # default, so the card shows what is reachable within it.
        max_calls = stated_iterations(settings=params)
        for row in rows:
            for kind in POLICIES:
                if beat.lost.is_set():
                    raise LeaseLost
                policy = policy_for(key, tools=schemas, seed=int(row["seed"]) * 1000, kind=kind)
                scores[kind].append(play_scored(terms, adapter, policy, row, max_calls))
                done += 1
                job_progress(job, lease_owner, done)
    finally:
        beat.stop()
        disconnect(adapter)
    floor, ceiling = recipe_bounds(terms, key, str(params.get("name") or ENV_NAME))
    return learnability_report(
        solver=scores[SOLVER], random=scores[RANDOM], term_names=names, floor=floor, ceiling=ceiling
    )
