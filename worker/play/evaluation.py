"""Playing one evaluation: for each model, the same seeded rows, played through the very
adapter class TRL gets (worker/episodes.py play_episode), greedy for models
(worker/play/evaluation_policy.py), every episode stored as it ends.

Imported only inside the Celery task. The caller holds the evaluation's lease
(webapp.evaluations.services.evaluation_claim); a thread renews it while this plays, and
every write goes through the lease, so a worker that lost it (stale, taken over) stops.
A takeover replays only the episodes not stored yet: the rows and seeds are a function of
the evaluation, so the table comes out the same.
"""

from __future__ import annotations

import logging
import random
import threading
import traceback
from pathlib import Path
from typing import Any

from django.conf import settings

from envs.adapters.attributes import episode_attributes
from envs.solvers import RANDOM, policy_for
from webapp.catalog.adapters import environment_adapter
from webapp.catalog.models import Environment
from webapp.evaluations.models import Evaluation, EvaluationEpisode
from webapp.evaluations.services import (
    evaluation_finish,
    evaluation_heartbeat,
    evaluation_record_episode,
)
from webapp.runs.checkpoints import model_resolve
from webapp.runs.config import CheckpointRef, RunEnvironment
from webapp.runs.services import model_folder_error
from webapp.settings.env import env_int
from worker.capacity import capacity_refusal, learn_capacity
from worker.datasets import prompt_rows
from worker.episodes import adapter_tools, disconnect, play_episode, stated_iterations, tool_schemas

log = logging.getLogger(__name__)

ENV_NAME = "eval"


class LeaseLost(Exception):
    """Another worker holds the evaluation now (or it ended): stop without writing."""


class Cancelled(Exception):
    pass


def evaluation_rows(evaluation: Evaluation) -> list[dict[str, Any]]:
    """The evaluation's rows: a function of its prompt, episodes and seed only, so every
    model (and every replay) plays the same episodes. With `episode_seeds`, row i plays seed
    episode_seeds[i] (and a `{phrase}` is drawn from that seed), whatever the evaluation."""
    item = RunEnvironment(
        environment=evaluation.environment_id or 0,
        name=ENV_NAME,
        prompt=evaluation.prompt,
        rows=1 if evaluation.episode_seeds else evaluation.episodes,
        reset=(evaluation.settings or {}).get("reset") or {},
    )
    if evaluation.episode_seeds:
        return [
            {**prompt_rows(item, random.Random(int(seed)))[0], "seed": int(seed)}
            for seed in evaluation.episode_seeds
        ]
    return prompt_rows(item, random.Random(evaluation.seed))


class _Heartbeat:
    """Renews the lease every ENVLAB_HEARTBEAT_SECONDS from a thread; the player checks
    `lost` and `cancel` between episodes."""

    def __init__(self, evaluation_id: int, lease_owner: str) -> None:
        self.evaluation_id = evaluation_id
        self.lease_owner = lease_owner
        self.lost = threading.Event()
        self.cancel = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="evaluation-heartbeat")

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from django.db import close_old_connections

        while not self._stop.wait(settings.ENVLAB_HEARTBEAT_SECONDS):
            try:
                ours, cancel = evaluation_heartbeat(
                    evaluation_id=self.evaluation_id, lease_owner=self.lease_owner
                )
            except Exception:  # the database may be briefly away: try again next beat
                log.warning("evaluation %s: heartbeat failed", self.evaluation_id, exc_info=True)
                close_old_connections()
                continue
            if not ours:
                self.lost.set()
                return
            if cancel:
                self.cancel.set()


def _load_model(entry: dict[str, Any], owner: Any) -> tuple[Any, Any]:
    import torch
    from transformers import AutoTokenizer

    from webapp.accounts.secrets import user_secret_value
    from worker.model_loading import load_causal_lm

    spec = entry["spec"]
    model = CheckpointRef.model_validate(spec) if isinstance(spec, dict) else spec
    resolved = model_resolve(model=model, user=owner)  # again, as the owner: a run may be gone
    if resolved.local and isinstance(model, str) and not model.startswith("demo:"):
        refused = model_folder_error(Path(resolved.source))
        if refused:
            raise ValueError(refused)
    token = None if resolved.local else user_secret_value(user=owner, name="hf_token")
    tokenizer = AutoTokenizer.from_pretrained(resolved.source, token=token)
    loaded = load_causal_lm(resolved.source, dtype=torch.float32, token=token)
    loaded.eval()
    return loaded, tokenizer


def _policies(evaluation: Evaluation, entry: dict[str, Any], adapter: Any) -> tuple[Any, int | None]:
    """A function of the row giving the episode's fresh policy, and the episode's call cap
    (play_episode's `max_calls`): the evaluation's max_tool_calling_iterations for a reference
    policy, None for a model, which counts its rounds itself."""
    kind = entry["kind"]
    key = evaluation.environment_key
    options = evaluation.settings or {}
    iterations = stated_iterations(settings=options)
    if kind in ("solver", RANDOM):
        schemas = tool_schemas(adapter)
        # Random: seeded by the row, so each episode draws the same calls in every evaluation.
        return lambda row: policy_for(key or "", tools=schemas, seed=int(row["seed"]), kind=kind), iterations
    from worker.play.evaluation_policy import ModelPolicy, prepare_tokenizer, training_chat_template

    model, tokenizer = _load_model(entry, evaluation.owner)
    tokenizer = prepare_tokenizer(tokenizer)
    template = training_chat_template(tokenizer)
    tools = list(adapter_tools(adapter).values())
    return lambda row: ModelPolicy(
        model=model,
        tokenizer=tokenizer,
        tools=tools,
        max_completion_length=int(options.get("max_completion_length", 512)),
        max_tool_calling_iterations=iterations,
        chat_template_kwargs=options.get("chat_template_kwargs") or {},
        chat_template=template,
    ), None


def _episode_record(
    index: int, model_index: int, label: str, row: dict[str, Any], adapter: Any, episode: Any
) -> dict[str, Any]:
    try:
        attributes = episode_attributes(adapter)
    except Exception:  # an adapter's odd state must not lose the episode
        log.exception("episode attributes failed")
        attributes = {}
    return {
        "model_index": model_index,
        "model": label[:500],
        "index": index,
        "seed": int(row["seed"]),
        "messages": episode.messages,
        "reward": float(episode.reward),
        "won": bool(episode.won),
        "tool_calls": int(episode.tool_calls),
        "tool_failures": int(episode.tool_failures),
        "lost": bool(episode.lost),
        "ended_by": episode.ended_by,
        "attributes": attributes,
    }


def _play(evaluation: Evaluation, lease_owner: str, beat: _Heartbeat) -> None:
    if evaluation.environment_id is None:  # deleted since launch (SET_NULL)
        raise Environment.DoesNotExist("the evaluation's environment was deleted")
    adapter_class = environment_adapter(
        evaluation.environment_id, owner=evaluation.owner, env_name=ENV_NAME, batch_size=1
    )
    rows = evaluation_rows(evaluation)
    for model_index, entry in enumerate(evaluation.model_specs):
        stored = set(
            EvaluationEpisode.objects.filter(
                evaluation=evaluation, model_index=model_index
            ).values_list("index", flat=True)
        )
        if len(stored) >= len(rows):
            continue
        adapter = adapter_class()
        try:
            make_policy, max_calls = _policies(evaluation, entry, adapter)
            for index, row in enumerate(rows):
                if index in stored:
                    continue
                if beat.lost.is_set():
                    raise LeaseLost
                if beat.cancel.is_set():
                    raise Cancelled
                episode = play_episode(adapter=adapter, policy=make_policy(row), row=row, max_calls=max_calls)
                record = _episode_record(
                    index, model_index, str(entry["label"]), row, adapter, episode
                )
                if not evaluation_record_episode(
                    evaluation_id=evaluation.pk, lease_owner=lease_owner, episode=record
                ):
                    raise LeaseLost
        finally:
            disconnect(adapter)


def evaluate(*, evaluation_id: int, lease_owner: str) -> str:
    import torch

    torch.set_num_threads(env_int("ENVLAB_TORCH_THREADS", 1))
    evaluation = Evaluation.objects.select_related("owner").get(pk=evaluation_id)
    status, error = Evaluation.Status.SUCCEEDED, ""
    with _Heartbeat(evaluation_id, lease_owner) as beat:
        try:
            if evaluation.environment_id is None:
                raise ValueError("the evaluation's environment was deleted")
            _play(evaluation, lease_owner, beat)
        except LeaseLost:
            log.info("evaluation %s: lease lost; another worker has it", evaluation_id)
            return "lease_lost"
        except Cancelled:
            status = Evaluation.Status.CANCELLED
        except Exception as exc:
            log.exception("evaluation %s failed", evaluation_id)
            status = Evaluation.Status.FAILED
            refusal = capacity_refusal(exc)
            if refusal is not None and evaluation.environment_id is not None:
                # The server's stated limit, for the next launch's check; the message is envlab's own.
                learn_capacity(refusal=refusal, environment_id=evaluation.environment_id, evaluation_id=evaluation_id)
                error = str(refusal)[:4000]
            else:
                error = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:4000]
    evaluation_finish(
        evaluation_id=evaluation_id, lease_owner=lease_owner, status=status, error=error
    )
    return str(status)
