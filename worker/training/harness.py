"""Harness runs: a loop-owning agent on an OpenEnv Harbor server plays every rollout, TRL's
asynchronous GRPO trainer learns from the turns it sampled (trl 1.16:
`trl.experimental.async_grpo`, `AsyncGRPOTrainer(rollout_worker=HarnessRolloutWorker(...))`).

The pieces that need no GPU are pure and tested field by field on CPU
(tests/worker/training/test_harness.py):
- `async_config_kwargs`: AsyncGRPOConfig's arguments from the one run config schema;
- `HarnessReward`: the run's reward recipe applied to a harness outcome (TRL's
  `HarnessRolloutOutcome`: the verifier's reward, tool calls and failures by tool, timed out);
- `harness_dataset_rows`: one row per Harbor task, carrying its index for the session factory;
- `rollout_worker_kwargs`: what `HarnessRolloutWorker` gets, the same values the async trainer
  would give its own worker, and all picklable (the worker runs them in a child process).

`build_harness_trainer` joins them with the model; it needs CUDA and a vLLM server, so it runs
only on a worker that advertises both (webapp/runs/routing.py sends it nowhere else).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envs.adapters.harbor import TASK_INDEX_KEY, HarborSessionFactory
from webapp.rewards.scoring import Episode, recipe_total
from webapp.rewards.terms import RecipeRef, RewardTerm, terms_dump
from webapp.runs.config import GRPOSettings, RunConfig
from webapp.runs.grpo_fields import ASYNC_REFUSED, TRL_PASSTHROUGH
from worker.training.grpo_args import LAB_CONSTANTS, trl_name

HARBOR_ENV_NAME = "harbor"
# Every core GRPO setting but `beta` is an AsyncGRPOConfig field of the same name (the tests check
# it against the dataclass); the async trainer has no KL term, and the schema refuses a harness run with beta.
ASYNC_GRPO_FIELDS = tuple(name for name in GRPOSettings.model_fields if name != "beta" and name not in TRL_PASSTHROUGH)
# The allowlisted TRL fields the async config has too, passed when set (the schema refuses the others).
ASYNC_TRL_FIELDS = tuple(name for name in TRL_PASSTHROUGH if name not in ASYNC_REFUSED)
# The lab's constants that the async trainer's config also has (it is a TrainingArguments too);
# bf16 stays off unless the run sets it, as before it was settable.
ASYNC_LAB_CONSTANTS = {**LAB_CONSTANTS, "bf16": False}


def async_config_kwargs(config: RunConfig, *, output_dir: str, vllm_server_base_url: str | None = None) -> dict[str, Any]:
    """Everything AsyncGRPOConfig(...) gets for a harness run."""
    grpo, harness = config.grpo, config.harness
    if grpo is None or harness is None:
        raise ValueError("not a harness run: it needs `grpo` and `harness`")
    url = config.generation.vllm_server_base_url or vllm_server_base_url
    if not url:
        raise ValueError("a harness run samples through a vLLM server, and none was given or started")
    kwargs: dict[str, Any] = {
        "output_dir": output_dir,
        **{name: getattr(grpo, name) for name in ASYNC_GRPO_FIELDS},
        "vllm_server_base_url": url,
        "max_inflight_tasks": harness.max_concurrent_rollouts,
        "max_staleness": harness.max_staleness,
        "weight_sync_steps": harness.weight_sync_steps,
        **ASYNC_LAB_CONSTANTS,
    }
    for name in ASYNC_TRL_FIELDS:
        value = getattr(grpo, name)
        if value is not None:
            kwargs[trl_name(name)] = value
    if config.generation.vllm_server_timeout is not None:
        kwargs["vllm_server_timeout"] = config.generation.vllm_server_timeout
    return kwargs


def harness_dataset_rows(config: RunConfig, tasks: list[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per task (the first `harness.tasks` of the dataset). The agent writes its own
    prompt from the task; the row's one message names the task, and carries its index for
    HarborSessionFactory.create (the rollout worker hands it the row's prompt only)."""
    harness = config.harness
    if harness is None:
        raise ValueError("not a harness run")
    names = {int(t["index"]): str(t.get("name") or "") for t in tasks or [] if isinstance(t.get("index"), int)}
    return [
        {"prompt": [{"role": "user", "content": names.get(index) or f"{harness.dataset} task {index}",
                     TASK_INDEX_KEY: index}]}
        for index in range(harness.tasks)
    ]


# --- the reward of a harness rollout -----------------------------------------------------------


def outcome_episode(outcome: Any) -> Episode:
    """A harness outcome as reward terms see an episode (envs/adapters/attributes.py names):
    the verifier's reward, tool calls and failures overall and by tool, and `timed_out`."""
    reward = outcome.env_reward
    reward = float(reward) if isinstance(reward, int | float) and math.isfinite(float(reward)) else None
    calls = int(outcome.tool_call_count or 0)
    failures = int(outcome.tool_failure_count or 0)
    attributes: dict[str, float] = {
        "tool_calls": float(calls),
        "tool_failures": float(failures),
        "tool_successes": float(max(0, calls - failures)),
        "steps": float(calls),
        "timed_out": 1.0 if outcome.timed_out else 0.0,
        "reward_count": 0.0 if reward is None else 1.0,
    }
    if reward is not None:
        attributes.update(reward=reward, reward_last=reward, reward_sum=reward, reward_max=reward,
                          solved=1.0 if reward > 0 else 0.0)
        attributes["won"] = attributes["solved"]
    for name, count in (outcome.tool_calls_by_name or {}).items():
        attributes[f"calls_{_name(name)}"] = float(count)
    chars = sum(
        len(str(m.get("content") or "")) for m in outcome.completion or []
        if isinstance(m, Mapping) and m.get("role") == "assistant"
    )
    return Episode(env_name=HARBOR_ENV_NAME, attributes=attributes, completion_chars=chars)


def _name(key: str) -> str:
    from envs.adapters.attributes import attribute_name

    return attribute_name(key)


class HarnessReward:
    """The run's reward recipe on a harness outcome: the rollout worker's `rollout_reward_fn`.
    None where the recipe cannot score it (no verifier reward and nothing else to go on), which
    the async trainer leaves out of the group's baseline. Picklable: it holds the terms as JSON."""

    __name__ = "harness_reward"

    def __init__(self, terms: list[RewardTerm] | RecipeRef) -> None:
        if isinstance(terms, RecipeRef):
            if terms.terms is None:
                raise ValueError(f"reward recipe {terms.recipe} was not resolved when the run launched")
            terms = terms.terms
        self.terms_json = terms_dump(list(terms))

    @functools.cached_property
    def terms(self) -> list[RewardTerm]:
        return [RewardTerm.model_validate(t) for t in self.terms_json]

    def __getstate__(self) -> dict[str, Any]:
        return {"terms_json": self.terms_json}

    def __call__(self, outcome: Any) -> float | None:
        # The weighted sum of the top-level terms, as GRPO's total; None when none applies.
        return recipe_total(self.terms, outcome_episode(outcome))


# --- the rollout worker and the trainer (GPU only) ------------------------------------------------


def session_factory(config: RunConfig, environment: Any, *, vllm_url: str, model_name: str) -> functools.partial:
    """What the harness rollout worker calls (with `sampling=` in loop-owning mode) for its
    ResourceSessionFactory. A partial of a module-level class: it pickles into the child."""
    harness = config.harness
    assert harness is not None
    return functools.partial(
        HarborSessionFactory,
        environment.base_url,
        dataset=harness.dataset,
        harness=harness.harness,
        sandbox=harness.sandbox,
        llm_url=vllm_url,
        model=model_name,
        agent_timeout_sec=harness.agent_timeout_sec,
        agent_step_limit=harness.agent_step_limit,
        env_name=str(getattr(environment, "name", "") or ""),
    )


def rollout_worker_kwargs(
    *, config: RunConfig, args: Any, environment: Any, dataset: Any, tokenizer: Any, model_name: str,
    eos_token_ids: list[int],
) -> dict[str, Any]:
    """HarnessRolloutWorker's arguments: what AsyncGRPOTrainer passes its own worker (trl 1.16,
    async_grpo_trainer.py), from the same AsyncGRPOConfig, plus the session factory and the reward."""
    return {
        "model_name": model_name,
        "dataset": dataset,
        "reward_funcs": [],
        "processing_class": tokenizer,
        "eos_token_ids": eos_token_ids,
        "num_generations": args.num_generations,
        "max_inflight_tasks": args.max_inflight_tasks,
        "queue_maxsize": args.queue_maxsize,
        "vllm_server_url": args.vllm_server_base_url,
        "max_tokens": args.max_completion_length,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "top_k": args.top_k,
        "min_p": args.min_p,
        "repetition_penalty": args.repetition_penalty,
        "request_timeout": args.request_timeout,
        "chat_template_kwargs": args.chat_template_kwargs,
        "max_tool_calling_iterations": args.max_tool_calling_iterations,
        "fork_threshold_tokens": args.fork_threshold_tokens,
        "harness_session_factory": session_factory(
            config, environment, vllm_url=args.vllm_server_base_url, model_name=model_name
        ),
        "rollout_reward_fn": HarnessReward(config.rewards),
    }


def build_harness_trainer(
    run: Any, config: RunConfig, output_dir: Path, *, model_source: str, hub_token: str | None,
    vllm_server_base_url: str | None = None, tasks: list[Mapping[str, Any]] | None = None,
) -> Any:
    """AsyncGRPOTrainer with OpenEnv's harness rollout worker on the run's Harbor server."""
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
    from trl.experimental.async_grpo.openenv_harness import HarnessRolloutWorker

    from webapp.catalog.models import Environment

    environment = Environment.objects.get(pk=config.environments[0].environment)
    args = AsyncGRPOConfig(**async_config_kwargs(
        config, output_dir=str(output_dir), vllm_server_base_url=vllm_server_base_url
    ))
    tokenizer = AutoTokenizer.from_pretrained(model_source, token=hub_token)
    model = AutoModelForCausalLM.from_pretrained(model_source, dtype="auto", token=hub_token)
    dataset = Dataset.from_list(harness_dataset_rows(config, tasks))
    eos = tokenizer.eos_token_id
    worker = HarnessRolloutWorker(**rollout_worker_kwargs(
        config=config, args=args, environment=environment, dataset=dataset, tokenizer=tokenizer,
        model_name=model_source, eos_token_ids=list(eos) if isinstance(eos, list) else [eos],
    ))
    from worker.training.checkpoint_save import AtomicCheckpoints

    class AtomicAsyncGRPOTrainer(AtomicCheckpoints, AsyncGRPOTrainer):
        """Whole checkpoints or none, as GRPO runs save them (worker/training/checkpoint_save.py)."""

    return AtomicAsyncGRPOTrainer(
        # TRL 1.16 takes a model id or folder only: a loaded model fails in its
        # create_model_from_path (TypeError, reproduced on CPU). Not changed here untested on GPU.
        model=model,  # type: ignore[arg-type]
        # HarnessRolloutWorker is TRL's own; its queues are narrower than TRL's protocol states.
        args=args, train_dataset=dataset, processing_class=tokenizer, rollout_worker=worker,  # type: ignore[arg-type]
    )
