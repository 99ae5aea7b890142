"""A reward recipe's dry run (webapp/workbench/dry_run.py): K groups of G episodes, each group on
one seeded row as GRPO's groups are, played through the adapter TRL would get, scored by the
recipe's terms exactly as the compiled reward functions score them (webapp.rewards.scoring).

Within a group the random policy draws differently for each episode and a model samples at
the run's temperature, so the spread a group shows is the spread GRPO would see; the solver is
deterministic, so its groups show the reward's spread across rows only (none within a group).
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

from django.conf import settings

from envs.solvers import policy_for
from webapp.catalog.adapters import environment_adapter
from webapp.catalog.models import Environment
from webapp.jobs.models import Job
from webapp.jobs.services import job_heartbeat
from webapp.rewards.scoring import episode_from_adapter, recipe_total
from webapp.rewards.terms import RewardTerm, walk_terms
from webapp.runs.config import RunEnvironment
from webapp.workbench.dry_run import dry_run_report
from webapp.workbench.learnability import recipe_bounds
from worker.datasets import prompt_rows
from worker.episodes import adapter_tools, disconnect, play_episode, stated_iterations, tool_schemas
from worker.play.jobs import LeaseLost, job_progress

log = logging.getLogger(__name__)
ENV_NAME = "env"




class _Beat(threading.Thread):
    """Renews the lease between episodes' progress writes: a model's long episode is not a dead worker."""

    def __init__(self, job_id: int, lease_owner: str) -> None:
        super().__init__(daemon=True, name="job-heartbeat")
        self.job_id, self.lease_owner = job_id, lease_owner
        self.lost = threading.Event()
        self.halt = threading.Event()

    def run(self) -> None:
        from django.db import close_old_connections, connection

        try:
            while not self.halt.wait(settings.ENVLAB_HEARTBEAT_SECONDS):
                try:
                    if not job_heartbeat(job_id=self.job_id, lease_owner=self.lease_owner):
                        self.lost.set()
                        return
                except Exception:  # the database may be briefly away
                    close_old_connections()
        finally:
            connection.close()  # this thread's own connection: not left open when the job ends

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=settings.ENVLAB_HEARTBEAT_SECONDS + 5)


def job_max_calls(params: dict[str, Any]) -> int | None:
    """play_episode's `max_calls` for the job's policy: a reference policy plays under the
    job's max_tool_calling_iterations (or the default a model gets), one call a round; a model
    counts its rounds itself."""
    return stated_iterations(settings=params) if params["policy"]["kind"] in ("solver", "random") else None


def _policy_factory(params: dict[str, Any], adapter: Any, owner: Any) -> Any:
    entry = params["policy"]
    key = params["environment_key"] or ""
    if entry["kind"] in ("solver", "random"):
        schemas = tool_schemas(adapter)
        return lambda row, k: policy_for(key, tools=schemas, seed=int(row["seed"]) * 1000 + k, kind=entry["kind"])
    from worker.play.evaluation import _load_model
    from worker.play.evaluation_policy import ModelPolicy, prepare_tokenizer, training_chat_template

    model, tokenizer = _load_model(entry, owner)
    tokenizer = prepare_tokenizer(tokenizer)
    template = training_chat_template(tokenizer)
    tools = list(adapter_tools(adapter).values())
    return lambda row, k: ModelPolicy(
        model=model, tokenizer=tokenizer, tools=tools,
        max_completion_length=int(params["max_completion_length"]),
        max_tool_calling_iterations=stated_iterations(settings=params),
        chat_template_kwargs=params.get("chat_template_kwargs") or {}, chat_template=template,
        temperature=float(params["temperature"]), seed=int(row["seed"]) * 1000 + k,
    )


def score_episode(terms: list[RewardTerm], adapter: Any, messages: list[dict[str, Any]], prompt_len: int) -> dict[str, float | None]:
    """Every term's score (containers and their children by name) and `total`."""
    completion = messages[prompt_len:]
    episode = episode_from_adapter(adapter, completion=completion)
    values: dict[str, float | None] = {}
    values["total"] = recipe_total(terms, episode, values)
    return values


def job_setup(job: Job, rows: int) -> tuple[list[RewardTerm], list[str], Any, list[dict[str, Any]]]:
    """A recipe job's pieces (dry runs, learnability): the recipe's terms and every term's name,
    an adapter bound to the job's environment as TRL would get it, and `rows` rows of the
    job's prompt seeded by its seed. The adapter is bound under the job's run-local `name`
    (webapp.workbench.dry_run.job_env_name), so terms limited to it apply and terms limited to
    other names score None; jobs queued before names were kept bind ENV_NAME."""
    params = job.params
    terms = [RewardTerm.model_validate(term) for term in params["terms"]]
    names = [term.name for _, term, _ in walk_terms(terms)]
    environment = Environment.objects.get(pk=params["environment"])
    env_name = str(params.get("name") or ENV_NAME)
    adapter_class = environment_adapter(environment, owner=job.owner, env_name=env_name, batch_size=1)
    item = RunEnvironment(environment=environment.pk, name=env_name, prompt=params["prompt"], rows=rows,
                          reset=params.get("reset") or {})
    return terms, names, adapter_class(), prompt_rows(item, random.Random(int(params["seed"])))


def play_scored(
    terms: list[RewardTerm], adapter: Any, policy: Any, row: dict[str, Any], max_calls: int | None
) -> dict[str, float | None]:
    """Play one episode of `row` with `policy` (play_episode's `max_calls`) and score it with the recipe's terms."""
    prompt = row["prompt"]
    prompt_len = len(prompt) if isinstance(prompt, list) else 1
    episode = play_episode(adapter=adapter, policy=policy, row=row, max_calls=max_calls)
    return score_episode(terms, adapter, episode.messages, prompt_len)


def dry_run(job: Job, lease_owner: str) -> dict[str, Any]:
    params = job.params
    terms, names, adapter, rows = job_setup(job, int(params["groups"]))
    groups: list[list[dict[str, float | None]]] = []
    done = 0
    beat = _Beat(job.pk, lease_owner)
    beat.start()
    try:
        make_policy = _policy_factory(params, adapter, job.owner)
        max_calls = job_max_calls(params)
        for row in rows:
            group = []
            for k in range(int(params["group_size"])):
                if beat.lost.is_set():
                    raise LeaseLost
                group.append(play_scored(terms, adapter, make_policy(row, k), row, max_calls))
                done += 1
                job_progress(job, lease_owner, done)
            groups.append(group)
    finally:
        beat.stop()
        disconnect(adapter)
    try:  # the recipe's range, for the probe's pass threshold; the totals' own range without it
        floor, ceiling = recipe_bounds(terms, str(params["environment_key"] or ""), str(params.get("name") or ENV_NAME))
    except Exception:
        floor = ceiling = None
    return dry_run_report(
        groups=groups, term_names=names, policy=str(params["policy"].get("label", "this policy")),
        floor=floor, ceiling=ceiling,
    )
