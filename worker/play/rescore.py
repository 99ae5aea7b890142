"""A re-score job (webapp/workbench/rescore.py): a finished run's stored rollouts scored again by
another recipe's terms, their GRPO advantages computed again, old and new side by side.

Reads the run's rollouts in keyset pages on (run, seq) -- only the columns the scores need,
never the transcripts -- so a run of 100k rollouts streams; it never writes to them. The
lease is renewed by a beat thread between the pages' progress writes (worker/play/dry_run.py).
"""

from __future__ import annotations

import logging
from typing import Any

from webapp.jobs.models import Job
from webapp.rewards.terms import RewardTerm
from webapp.runs.models import Rollout
from webapp.workbench.rescore import Rescorer
from worker.play.dry_run import _Beat
from worker.play.jobs import LeaseLost, job_progress

log = logging.getLogger(__name__)

PAGE = 2000
FIELDS = ("seq", "step", "prompt_key", "env", "rewards", "reward", "advantage", "episode", "unscored")


def rollout_pages(run_id: int, page: int = PAGE) -> Any:
    """The run's rollouts as dicts of FIELDS, `page` at a time, in seq order."""
    after = -1
    while True:
        rows = list(Rollout.objects.filter(run_id=run_id, seq__gt=after).order_by("seq").values(*FIELDS)[:page])
        if not rows:
            return
        yield rows
        after = rows[-1]["seq"]


def rescore(job: Job, lease_owner: str) -> dict[str, Any]:
    params = job.params
    terms = [RewardTerm.model_validate(term) for term in params["terms"]]
    scorer = Rescorer(
        terms, scale_rewards=str(params.get("scale_rewards") or "group"),
        num_generations=params.get("num_generations"),
    )
    done = 0
    beat = _Beat(job.pk, lease_owner)
    beat.start()
    try:
        for rows in rollout_pages(int(params["run"])):
            if beat.lost.is_set():
                raise LeaseLost
            for row in rows:
                scorer.add(row)
            done += len(rows)
            job_progress(job, lease_owner, done)
        report = scorer.report()
    finally:
        beat.halt.set()
    report.update({"run": params["run"], "recipe": params["recipe"], "recipe_name": params.get("recipe_name", ""),
                   "version": params["version"], "term_names": scorer.term_names})
    return report
