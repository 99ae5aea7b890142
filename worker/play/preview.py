"""The reward composer's preview of a freshly played episode (webapp.workbench.composer
draft_play_create): ONE episode of the job's seeded row, played by the solver or the random
policy through the adapter TRL would get (bound under the job's run-local name, as a dry run
binds it: worker/play/dry_run.py job_setup), scored by the draft's terms with the very function
the stored-rollout preview uses (webapp.workbench.composer.preview_scores).

The result: `{total, values, tree}` as the stored preview answers, plus the episode's
transcript (`messages`, TRL's chat format), its `attributes` and a summary `episode`.
"""

from __future__ import annotations

from typing import Any

from webapp.jobs.models import Job
from webapp.rewards.scoring import episode_from_adapter
from webapp.workbench.composer import preview_scores
from worker.episodes import disconnect, play_episode
from worker.play.dry_run import _policy_factory, job_max_calls, job_setup
from worker.play.jobs import job_progress


def preview(job: Job, lease_owner: str) -> dict[str, Any]:
    params = job.params
    terms, _names, adapter, rows = job_setup(job, 1)
    row = rows[0]
    try:
        policy = _policy_factory(params, adapter, job.owner)(row, 0)
        played = play_episode(adapter=adapter, policy=policy, row=row, max_calls=job_max_calls(params))
        prompt = row["prompt"]
        prompt_len = len(prompt) if isinstance(prompt, list) else 1
        # Read as the dry run's score_episode reads it: the adapter after the episode.
        episode = episode_from_adapter(adapter, completion=played.messages[prompt_len:])
    finally:
        disconnect(adapter)
    job_progress(job, lease_owner, 1)
    return {
        **preview_scores(terms, episode),
        "episode": {
            "env": episode.env_name,
            "seed": row.get("seed"),
            "policy": str(params["policy"].get("label") or params["policy"].get("kind") or ""),
            "won": played.won,
            "reward": played.reward,
            "tool_calls": played.tool_calls,
            "tool_failures": played.tool_failures,
            "lost": played.lost,
            "ended_by": played.ended_by,
        },
        "attributes": dict(episode.attributes),
        "messages": played.messages,
    }
