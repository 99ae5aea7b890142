"""Training one run: GRPOTrainer with environment_factory, telemetry, cooperative stop,
resume from the last recorded checkpoint. Imported only inside the Celery task."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch
from django.conf import settings
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback
from trl import GRPOConfig, GRPOTrainer

from envs.adapters import outage, toolstats
from envs.adapters.activity import ACTIVITY, GENERATION, STARTING, TRAINING_STEP
from envs.adapters.kinds import harbor
from envs.adapters.router import router_class
from envs.netguard import check_outbound_url
from webapp.accounts.secrets import user_secret_value
from webapp.catalog.adapters import environment_adapter
from webapp.catalog.credentials import ors_credentials
from webapp.catalog.kinds import environment_kind
from webapp.catalog.models import Environment
from webapp.runs.checkpoints import (
    checkpoint_complete,
    model_config_file,
    newest_complete_checkpoint,
    run_dir,
    warmup_model_dir,
)
from webapp.runs.config import GRPOSettings, RunConfig
from webapp.runs.models import Run
from webapp.runs.services import (
    run_phase_set,
    run_rewind,
    run_warmup_done,
)
from webapp.runs.telemetry.group_starts import GroupStartMeter, group_starts
from webapp.runs.telemetry.health import HealthMonitor
from webapp.runs.telemetry.record import LeaseLost, telemetry_record
from webapp.settings.env import env_int
from worker.datasets import episode_rows
from worker.model_loading import load_for_training
from worker.training.checkpoint_save import AtomicCheckpoints, remove_leftovers
from worker.training.distributed import RankGroup, peer_lost
from worker.training.grpo_args import grpo_config_kwargs
from worker.training.lifecycle import (
    error_message,
    failure_class,
    finish_run,
    learn_capacity,
    managed_vllm,
    mark_failure,
    outage_alerts,
    outage_end,
    outage_wait_stopped,
    run_model_source,
)
from worker.training.perf import PerfMeter, completion_tokens, perf_metrics, tool_seconds
from worker.training.rewards import compile_rewards, scored_episode
from worker.training.stall import StallWatch
from worker.training.system_metrics import LatestSample, SystemSampler, rank_metrics
from worker.training.telemetry import TelemetrySink
from worker.training.trackers import USER_CREDENTIALS, prepare_trackers
from worker.training.vllm_guard import guard_vllm_client, trust_vllm_origin

log = logging.getLogger(__name__)


class CapturingGRPOTrainer(AtomicCheckpoints, GRPOTrainer):
    """Hands every scored rollout of a generation batch to the telemetry sink; saves whole
    checkpoints or none (worker/training/checkpoint_save.py).

    Reads TRL's private rolling buffers right after scoring (trl 1.16; pinned in
    pyproject and covered by the end-to-end test): the newest len(inputs) entries are
    exactly this batch.
    """

    envlab_sink: TelemetrySink | None = None
    envlab_health: HealthMonitor | None = None
    envlab_perf: PerfMeter | None = None
    # Which groups started from different observations (the callback's, for the step's metrics).
    envlab_starts: GroupStartMeter | None = None
    # This process's place among the run's training processes (None: the only one).
    envlab_group: RankGroup | None = None

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        started = time.perf_counter()
        # What a stalled run is stuck in; a tool call inside names itself (envs/adapters/base.py).
        with ACTIVITY.doing(GENERATION):
            output = super()._generate_and_score_completions(inputs)
        perf = self.envlab_perf
        if perf is not None:
            try:
                perf.generation(seconds=time.perf_counter() - started, tokens=completion_tokens(output))
            except Exception:  # telemetry must never break training
                log.exception("throughput measurement failed")
        sink, group = self.envlab_sink, self.envlab_group
        # With several processes every one takes part (the same on all of them): TRL's logs hold
        # the whole batch, each process's environments only its share.
        if group is not None or sink is not None or toolstats.COLLECTOR.active:
            try:
                facts = self._envlab_episode_facts(len(inputs))
            except Exception:  # telemetry must never break training
                log.exception("rollout capture failed")
                facts = [{} for _ in inputs]
            if group is not None:
                facts = group.gather(facts)  # every process's, in process order, as TRL gathers its logs
                if not group.lead:
                    return output
            try:
                rows = self._envlab_rollouts(facts)
                # Calls TRL answered without a tool (an unknown name): only the transcripts show them.
                toolstats.COLLECTOR.record_transcripts(rows, tool_names=self.envlab_tool_names())
                if sink is not None:
                    sink.rollouts(rows)
                if self.envlab_health is not None:
                    self.envlab_health.tool_results(rows)
            except Exception:  # telemetry must never break training
                log.exception("rollout capture failed")
                return output
            if self.envlab_starts is not None:
                try:
                    # The gathered batch, in TRL's order: its groups span processes' shares.
                    generations = self.num_generations
                    if generations is None:
                        raise TypeError("TRL set no num_generations")
                    self.envlab_starts.add(group_starts(rows, int(generations)))
                except Exception:  # telemetry must never break training
                    log.exception("group start check failed")
        return output

    def envlab_tool_names(self) -> list[str]:
        """The names of the tools TRL offers the model (every environment's)."""
        return [str(getattr(tool, "__name__", "")) for tool in self.tools or []]

    def _envlab_episode_facts(self, n: int) -> list[dict[str, Any]]:
        """What this process's environments know of the batch's `n` episodes (plain data)."""
        environments: list[Any] = list(self.environments or [])[-n:]
        facts = []
        for i in range(n):
            env = environments[i] if i < len(environments) else None
            facts.append({
                "env": getattr(env, "env_name", ""),
                "seed": _episode_seed(env),
                # Of the episode's own adapter: a router reads through to it.
                "reset_fingerprint": _reset_fingerprint(env),
                "episode": _episode_facts(env),
                "lost": bool(getattr(env, "lost", False)),
                "lost_reason": str(getattr(env, "lost_reason", "") or "")[:500],
            })
        return facts

    def _envlab_rollouts(self, facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The batch's rollouts: TRL's logs of its newest len(facts) completions, with each
        episode's facts."""
        n = len(facts)
        logs = self._logs
        prompts = list(logs["prompt"])[-n:]
        completions = list(logs["completion"])[-n:]
        advantages = list(logs["advantages"])[-n:]
        # TRL types its private `_logs` as collections; "rewards" is its dict of per-term lists.
        reward_logs = cast("Mapping[str, Any]", logs["rewards"])
        rewards = {name: list(values)[-n:] for name, values in reward_logs.items()}
        weights = self.reward_weights.tolist()
        step = self.state.global_step + 1
        rows = []
        for i in range(len(prompts)):
            per_term = {name: _finite(values[i]) for name, values in rewards.items()}
            scored = [(w, v) for w, v in zip(weights, per_term.values(), strict=False) if v is not None]
            rows.append({
                "step": step,
                **facts[i],
                "prompt": _jsonable(prompts[i]),
                "messages": _jsonable(completions[i]),
                "rewards": per_term,
                "reward": sum(w * v for w, v in scored) if scored else None,
                "advantage": _finite(advantages[i]) if i < len(advantages) else None,
            })
        return rows


def _episode_seed(env: Any) -> int | None:
    seed = getattr(env, "_episode_seed", None) if env is not None else None  # envs/adapters/base.py
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _reset_fingerprint(env: Any) -> str | None:
    fingerprint = getattr(env, "_reset_fingerprint", None) if env is not None else None  # envs/adapters/base.py
    return fingerprint if isinstance(fingerprint, str) else None


def _episode_facts(env: Any) -> dict[str, Any]:
    """What the reward terms scored this episode on (worker/training/rewards.py), so a stored run can
    be re-scored with another recipe: attributes, components and the completion's size."""
    episode = scored_episode(env) if env is not None else None
    if episode is None:
        return {}
    return {
        "attributes": dict(episode.attributes),
        "components": {name: dict(values) for name, values in episode.components.items()},
        "completion_tokens": episode.completion_tokens,
        "completion_chars": episode.completion_chars,
    }


def _finite(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


class TelemetryCallback(TrainerCallback):
    """Metrics at every log; cooperative stop at step end; checkpoints recorded in order.

    With several training processes (`group`), only the first has the sink and the health
    monitor; the others send it their tool counts and throughput, and every process applies
    the first's decision to stop, so all stop (and save) at the same step."""

    def __init__(
        self, sink: TelemetrySink | None, health: HealthMonitor | None = None, group: RankGroup | None = None,
        system: LatestSample | None = None,
    ) -> None:
        self.sink = sink
        self.health = health
        self.group = group
        self.system = system  # this process's newest system sample, for the first (not the first only)
        self.stop_reason: str | None = None
        self.stop_message = ""
        self._tool_step: int | None = None
        self.perf = PerfMeter(cuda=torch.cuda.is_available())
        self.starts = GroupStartMeter()
        self._step_started: float | None = None

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
        if logs:
            logs = self._with_tool_metrics(state.global_step, logs)
            if self.sink is not None:
                self.sink.metrics(state.global_step, logs)
            self._check_health(state.global_step, logs, control)

    def _with_tool_metrics(self, step: int, logs: dict[str, Any]) -> dict[str, Any]:
        """`logs` with the step's per-tool counts (envs/adapters/toolstats.py) and mismatched groups
        (webapp/runs/telemetry/group_starts.py). Not in the end-of-training summary, logged at the last step again:
        its zeros would replace that step's counts."""
        if "train_runtime" in logs or step == self._tool_step:
            return logs
        self._tool_step = step
        logs = {**logs, **self._group_start_metrics(step)}
        counts: dict[str, Any] | None = None
        perf: dict[str, Any] = {}
        try:
            counts = toolstats.COLLECTOR.take()
        except Exception:  # telemetry must never break training
            log.exception("per-tool metrics failed at step %s", step)
        try:
            perf = self.perf.take()
        except Exception:  # telemetry must never break training
            log.exception("perf metrics failed at step %s", step)
        sample = self.system.take() if self.system is not None else None
        parts = [(counts, perf, sample)]
        if self.group is not None:
            parts = self.group.gather(parts)  # every process's, on every process
        try:
            merged = toolstats.merge_counts(part[0] for part in parts)
            values = {**toolstats.counts_metrics(merged), **perf_metrics([part[1] for part in parts if part[1]])}
            if "perf/step_s" in values:  # tool time beside a timed step: the chart sets them side by side
                values.update(tool_seconds(merged) or {"perf/tool_s": 0.0})
            for rank, part in enumerate(parts):
                if rank and part[2]:  # the first's own samples reach its sink directly
                    values.update(rank_metrics(rank, part[2]))
        except Exception:  # telemetry must never break training
            log.exception("tool and perf metrics failed at step %s", step)
            return logs
        return {**logs, **values} if values else logs

    def _group_start_metrics(self, step: int) -> dict[str, float]:
        """`group_mismatch(_frac)` of the step's generation batches, and the same groups to the health
        monitor. Only the first process holds any: the gathered rollouts reach it alone. None at a step
        that generated nothing (TRL reuses a generation batch for steps_per_generation steps)."""
        try:
            starts = self.starts.take()
            if starts is None:
                return {}
            if self.health is not None:
                self.health.group_starts(starts)
            return starts.metrics()
        except Exception:  # telemetry must never break training
            log.exception("group start metrics failed at step %s", step)
            return {}

    def _check_health(self, step: int, logs: dict[str, Any], control: Any) -> None:
        stop_message = ""
        if self.health is not None:
            try:
                for alert in self.health.observe(step, logs):
                    if self.sink is not None:
                        self.sink.alert(alert.as_event())
                stop = self.health.stop
                if stop is not None and self.stop_reason is None:
                    stop_message = f"stopped by the '{stop.kind}' alert at step {stop.step}: {stop.message}"
            except Exception:  # a rule's bug must never break training
                log.exception("run health check failed at step %s", step)
        if self.group is not None:  # one process: agree() returns the value as it is
            stop_message = self.group.agree(stop_message)
        if stop_message and self.stop_reason is None:
            # on_log runs before the step's save in Trainer._maybe_log_save_evaluate: this
            # step's checkpoint is written and recorded, then training ends.
            self.stop_reason = "alert"
            self.stop_message = stop_message
            control.should_save = True
            control.should_training_stop = True

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        # The step's generation, tool calls and saves record themselves inside it.
        ACTIVITY.enter(TRAINING_STEP)
        self._step_started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        started = self._step_started
        if started is not None:  # logged with this step (on_log comes after on_step_end)
            self.perf.step(seconds=time.perf_counter() - started)
            self._step_started = None
        reason = None
        sink = self.sink
        if sink is not None:
            sink.step_done(state.global_step)
            if sink.lease_lost.is_set():
                reason = "lease_lost"
            elif sink.failure_reason():
                reason = "telemetry_failed"
            elif sink.cancel_requested.is_set():
                reason = "cancelled"
        if self.group is not None:  # one process: agree() returns the value as it is
            reason = self.group.agree(reason)
        if reason is None:
            return
        self.stop_reason = reason
        control.should_training_stop = True
        if reason == "lease_lost":
            control.should_save = False  # the run's folder belongs to the worker that took it over
        elif reason == "cancelled":
            control.should_save = True

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        # Called after every save, also one the disk refused (AtomicCheckpoints): only a
        # checkpoint that is whole on disk becomes the run's, the one resume continues from.
        step = state.global_step
        if self.sink is not None and checkpoint_complete(Path(args.output_dir) / f"checkpoint-{step}", step):
            self.sink.checkpoint(step)


def _prune_checkpoints(output_dir: Path, keep_step: int | None) -> None:
    """Drop checkpoints newer than the recorded one: they belong to a lost timeline."""
    for path in output_dir.glob("checkpoint-*"):
        try:
            step = int(path.name.split("-", 1)[1])
        except ValueError:
            continue
        if keep_step is None or step > keep_step:
            shutil.rmtree(path, ignore_errors=True)


def _leftovers_recorded(run_id: int, lease_owner: str, removed: list[dict[str, Any]], start_step: int) -> bool:
    """One `checkpoint_incomplete` event for what remove_leftovers removed. False: the lease is lost."""
    steps = sorted({item["step"] for item in removed if item["step"] is not None})
    named = ", ".join(f"step {step}" for step in steps) or ", ".join(item["folder"] for item in removed)
    message = (
        f"Removed the half-written checkpoint ({named}) that a save cut short left behind (the worker "
        f"stopped while saving); training continues from step {start_step}."
    )
    try:
        telemetry_record(run_id=run_id, lease_owner=lease_owner, events=[
            ("event", {"kind": "checkpoint_incomplete", "message": message,
                       "data": {"removed": removed, "start_step": start_step}}),
        ])
    except LeaseLost:
        return False
    return True


def environment_factory(config: RunConfig, owner: Any = None) -> tuple[type[Any], dict[str, Any]]:
    """The adapter class TRL gets (a router when the run has several environments), and
    the task listers of environments that bring their own tasks (Open Reward Standard).
    `owner`: the run's owner, whose own stored keys its environments may use."""
    members: dict[str, type[Any]] = {}
    task_rows: dict[str, Any] = {}
    # A warm-up alone plays one episode at a time per environment.
    batch = config.grpo.generation_batch_size if config.grpo is not None else 1
    for item in config.environments:
        environment = Environment.objects.get(pk=item.environment)
        # A generic adapter reads the server's tools: retried while it is out of reach.
        bind = functools.partial(environment_adapter, environment, owner=owner, env_name=item.name, batch_size=batch)
        try:
            members[item.name] = outage.call_with_retry(bind, env=environment.name, what="reading its tools")
        except Exception as exc:
            mark_failure(exc, Run.Failure.CONFIG)  # a kind GRPO cannot train on, a server that is not one
            raise
        kind = environment_kind(environment.kind)
        if kind is not None and kind.tasks_from_server:  # its tasks are the episodes' rows (ORS)
            task_rows[item.name] = _ors_task_rows(environment, owner)
    if len(members) == 1:
        return next(iter(members.values())), task_rows
    return router_class(members), task_rows


def _ors_task_rows(environment: Environment, owner: Any) -> Any:
    from envs.adapters.ors import ors_rows

    metadata = environment.metadata or {}

    def rows(item: Any) -> list[dict[str, Any]]:
        found = ors_rows(
            base_url=environment.base_url,
            env_name=str(metadata.get("ors_env") or metadata.get("name") or environment.name),
            split=item.split,
            num_tasks=item.num_tasks if item.indices is None else None,
            indices=item.indices,
            **ors_credentials(environment, owner),
        )
        if item.prompt:
            for row in found:
                row["prompt"] = [{"role": "user", "content": item.prompt}]
        return found

    return rows


def build_trainer(
    run: Run, config: RunConfig, sink: TelemetrySink | None, output_dir: Path, model_source: str | None = None,
    vllm_server_base_url: str | None = None,
) -> CapturingGRPOTrainer:
    """`model_source`: start from this folder (the run's own warm-up model) instead of `model`.
    `vllm_server_base_url`: the vLLM server the worker started for this run, if it did."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    assert config.grpo is not None
    try:
        source, hub_token = (model_source, None) if model_source else run_model_source(run, config)
        tokenizer = AutoTokenizer.from_pretrained(source, token=hub_token)
        # LoRA: a new adapter for TRL to wrap the model in, or the adapter the run starts from
        # (its warm-up's) continued; either way the checkpoints hold the adapter alone.
        model, peft_config = load_for_training(
            source, peft=config.peft, dtype=torch.float32 if config.device == "cpu" else "auto", token=hub_token
        )
    except Exception as exc:
        mark_failure(exc, Run.Failure.MODEL)
        raise
    factory, task_rows = environment_factory(config, run.owner)
    reward_funcs, weights = compile_rewards(config.rewards)
    if config.generation.vllm_server_base_url:
        # Checked at launch, and again where it is used: the name may resolve elsewhere now.
        check_outbound_url(config.generation.vllm_server_base_url, name="vllm_server_base_url")
    if config.generation.vllm_server_base_url or vllm_server_base_url:
        # TRL's client, connection by connection (worker/training/vllm_guard.py).
        if vllm_server_base_url:
            trust_vllm_origin(vllm_server_base_url)
        guard_vllm_client()
    # Other trackers the run reports to read their settings from the environment (worker/training/trackers.py).
    prepare_trackers(
        config, output_dir=output_dir, trackio_dir=Path(settings.ENVLAB_TRACKIO_DIR),
        credentials={
            variable: value for variable, name in USER_CREDENTIALS.items()
            if config.report_to and (value := user_secret_value(user=run.owner, name=name))
        },
    )
    # The one schema's fields by name, plus the lab's constants (worker/training/grpo_args.py).
    args = GRPOConfig(
        **grpo_config_kwargs(
            config, output_dir=str(output_dir), reward_weights=weights, vllm_server_base_url=vllm_server_base_url,
            run_name=f"run-{run.pk}",
        )
    )
    trainer = CapturingGRPOTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        reward_funcs=list(reward_funcs),  # as a list of TRL's wider item type (lists are invariant)
        train_dataset=Dataset.from_list(episode_rows(config, task_rows=task_rows)),
        environment_factory=factory,
        peft_config=peft_config,
    )
    trainer.envlab_sink = sink
    # With tqdm off, transformers prints every log dict to stdout; the database has them.
    trainer.remove_callback(PrinterCallback)
    return trainer


def train(*, run_id: int, lease_owner: str, worker_name: str) -> str:
    torch.set_num_threads(env_int("ENVLAB_TORCH_THREADS", 1))
    run = Run.objects.get(pk=run_id)
    config = RunConfig.model_validate(run.config)
    output_dir = run_dir(run.pk)
    output_dir.mkdir(parents=True, exist_ok=True)
    warmup_dir = warmup_model_dir(run.pk)
    if run.attempts <= 1:
        # A first attempt has no warm-up yet: a folder there is left from another run with
        # this id (a reset database), like the checkpoints _prune_checkpoints removes.
        shutil.rmtree(warmup_dir.parent, ignore_errors=True)
    # A warm-up that ended left its model; one that did not is redone, and GRPO starts after it.
    # Its model is whole once saved: full weights, or (with `peft`) the adapter alone.
    warmup_pending = config.sft_warmup is not None and model_config_file(warmup_dir) is None
    # A save cut short (the worker killed while saving) left a staging folder: never resumed from.
    removed = remove_leftovers(output_dir)
    # The recorded checkpoint, or the newest whole one before it should that one be gone.
    found = None if warmup_pending else newest_complete_checkpoint(output_dir, up_to=run.checkpoint_step)
    resume_from, start_step = (found[1], found[0]) if found else (None, 0)
    _prune_checkpoints(output_dir, start_step or None)
    if not run_rewind(
        run_id=run.pk, lease_owner=lease_owner, to_step=start_step,
        keep_warmup=config.sft_warmup is not None and not warmup_pending,
    ):
        return "lease_lost"
    if removed and not _leftovers_recorded(run.pk, lease_owner, removed, start_step):
        return "lease_lost"
    if warmup_pending:
        ended = _warmup_phase(run, config, lease_owner, warmup_dir)
        if ended is not None:
            return ended
    if config.grpo is None:
        # A warm-up alone whose model was saved before its worker died: nothing left to do.
        finish_run(run_id=run.pk, lease_owner=lease_owner, status=Run.Status.SUCCEEDED, error="", step=None)
        return Run.Status.SUCCEEDED
    if config.sft_warmup is not None and not run_phase_set(
        run_id=run.pk, lease_owner=lease_owner, phase=Run.Phase.GRPO, step=start_step
    ):
        return "lease_lost"
    model_source = str(warmup_dir) if config.sft_warmup is not None else None
    if config.ranks > 1:
        # Several training processes (accelerate): this task starts and watches them, and
        # they train and record the run (worker/training/distributed.py).
        from worker.training.distributed import run_ranks

        return run_ranks(
            run=run, config=config, lease_owner=lease_owner, output_dir=output_dir, start_step=start_step,
            resume_from=resume_from, model_source=model_source,
        )
    return grpo_phase(
        run=run, config=config, lease_owner=lease_owner, output_dir=output_dir, start_step=start_step,
        resume_from=resume_from, model_source=model_source,
    )


def grpo_phase(
    *, run: Run, config: RunConfig, lease_owner: str, output_dir: Path, start_step: int,
    resume_from: Path | None, model_source: str | None, group: RankGroup | None = None, vllm_url: str | None = None,
) -> str:
    """Train the GRPO phase and record how it ended. `group`: this process's place among the
    run's training processes (None: the only one, which starts the managed vLLM server itself;
    with several, the task that launched them did, at `vllm_url`). Only the first process
    records anything: telemetry, the lease, alerts and the run's end; all stop at the same step."""
    lead = group is None or group.lead
    ACTIVITY.enter(STARTING)  # this process's record: an earlier run's last phase is not this one's
    sink = TelemetrySink(
        run_id=run.pk, lease_owner=lease_owner, heartbeat_seconds=settings.ENVLAB_HEARTBEAT_SECONDS,
        max_pending=settings.ENVLAB_TELEMETRY_MAX_PENDING, outage_seconds=settings.ENVLAB_TELEMETRY_OUTAGE_SECONDS,
        # Stuck, not dead: the first process's own record (the others' show as it waiting for them).
        stall=StallWatch(limit_seconds=settings.ENVLAB_STALL_SECONDS, doing=lambda: ACTIVITY.now),
    ) if lead else None
    if sink is not None:
        sink.step_done(start_step)
    # Every process samples itself; one that records nothing hands its newest sample to the first
    # with the step's counts (and samples no GPU: the first reads every GPU of the run's).
    held = None if sink is not None else LatestSample()
    sampler = SystemSampler(
        sink.sampled if sink is not None else held.put,  # type: ignore[union-attr]
        interval=settings.ENVLAB_SYSTEM_METRICS_SECONDS, gpus=None if sink is not None else False,
    )
    sampler.start()
    health = HealthMonitor(config.alerts, tool_env=True) if lead and config.alerts.enabled else None
    callback = TelemetryCallback(sink, health, group=group, system=held)
    status, error, failure = Run.Status.SUCCEEDED, "", ""
    train_seconds = None
    vllm = managed_vllm(run, config, output_dir, model_source) if group is None else nullcontext(vllm_url)
    alerts = outage_alerts(sink) if sink is not None else nullcontext()
    try:
        with alerts, vllm as url:
            if config.harness is not None:
                # A loop-owning agent on a Harbor server plays the rollouts (worker/training/harness.py):
                # metrics come through the callback; the agent's transcripts stay on the server.
                trainer = _harness_trainer(run, config, output_dir, url)
                trainer.envlab_sink = sink  # told of a checkpoint the disk refused
            else:
                trainer = build_trainer(
                    run, config, sink, output_dir, model_source=model_source, vllm_server_base_url=url
                )
                trainer.envlab_group = group
                trainer.envlab_health = health
                trainer.envlab_perf = callback.perf
                trainer.envlab_starts = callback.starts
                toolstats.COLLECTOR.start(tool_names=trainer.envlab_tool_names())
            trainer.add_callback(callback)
            started = time.perf_counter()
            trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
            train_seconds = time.perf_counter() - started
        if callback.stop_reason == "cancelled":
            status = Run.Status.CANCELLED
        elif callback.stop_reason == "alert":
            status, error, failure = Run.Status.FAILED, callback.stop_message, Run.Failure.ALERT
        elif callback.stop_reason == "telemetry_failed":
            # Interrupted, not failed: nothing is wrong with the run, and resume continues
            # from its last recorded checkpoint once the database is back.
            status, error = Run.Status.INTERRUPTED, sink.failure if sink is not None else ""
    except Exception as exc:
        if not lead:
            raise  # the process exits with an error; its launcher stops the others, the first records it
        if group is not None and group.world > 1 and peer_lost(exc):
            # Another process died (killed, out of memory): its collective failed here too. The
            # task that launched them records the run failed with the end of their log, which
            # says which process died and how; this error alone ("connection reset by peer")
            # would hide that.
            log.error("run %s: a training process was lost (%s); the task records the end", run.pk, exc)
            raise
        interrupted = outage_end(exc, checkpoint_step=_recorded_checkpoint(run.pk))
        if outage_wait_stopped(exc) and sink is not None:
            # Cancelled (or taken over) while waiting for an environment: no step end to stop at.
            if sink.lease_lost.is_set():
                callback.stop_reason = "lease_lost"
            else:
                callback.stop_reason = "cancelled"
                status, error = Run.Status.CANCELLED, "cancelled while waiting for an environment server"
        else:
            status, error, failure = _phase_end(
                exc, run.pk, config, interrupted=interrupted, step=sink.step + 1 if sink is not None else None,
                phase="grpo",
            )
    finally:
        toolstats.COLLECTOR.stop()
        sampler.stop()
        written = sink is None or sink.close(timeout=_close_timeout())
        if not written:
            log.error("run %s: telemetry not fully written before the end", run.pk)
    if callback.stop_reason == "lease_lost":
        return "lease_lost"
    if sink is None:
        return status
    if not written and status in (Run.Status.SUCCEEDED, Run.Status.CANCELLED):
        status, error = Run.Status.INTERRUPTED, _unwritten_error(sink)
    finish_run(
        run_id=run.pk, lease_owner=lease_owner, status=status, error=error, step=sink.step, failure=failure,
        data={"train_seconds": train_seconds, "telemetry": sink.stats, **({"processes": group.world} if group else {})},
    )
    return status


def _phase_end(
    exc: Exception, run_id: int, config: RunConfig, *, interrupted: str | None, step: int | None, phase: str
) -> tuple[Run.Status, str, str]:
    """(status, error, failure) of a phase that raised `exc`, unless a cancellation explains
    it. `interrupted` (from outage_end): an environment out of reach for too long, nothing
    is wrong with the run. Else it failed: logged with its traceback and classified, and
    what the error says about the server's capacity is learned."""
    what = "warm-up " if phase == "warmup" else ""
    if interrupted is not None:
        log.warning("run %s: %s%s", run_id, what, interrupted)
        return Run.Status.INTERRUPTED, interrupted, ""
    log.exception("run %s: warm-up failed" if phase == "warmup" else "run %s failed", run_id)
    ended = Run.Status.FAILED, error_message(exc), failure_class(exc)
    learn_capacity(exc, config=config, run_id=run_id, step=step, phase=phase)
    return ended


def _close_timeout() -> float:
    """How long the end of a phase waits for its telemetry: a database outage is waited
    out up to ENVLAB_TELEMETRY_OUTAGE_SECONDS, as during training."""
    return settings.ENVLAB_TELEMETRY_OUTAGE_SECONDS + 30.0


def _unwritten_error(sink: TelemetrySink) -> str:
    """A run that trained to its end (or was cancelled) with telemetry the database never
    got is not done: stored steps would be missing. Interrupted, resume trains them again
    from the last recorded checkpoint."""
    return sink.failure or (
        "the run's last metrics and rollouts could not be stored before it ended; "
        "resume continues from its last recorded checkpoint."
    )


def _recorded_checkpoint(run_id: int) -> int | None:
    try:
        return Run.objects.filter(pk=run_id).values_list("checkpoint_step", flat=True).first()
    except Exception:  # the message only: the database may be away too
        return None


def _harness_trainer(run: Run, config: RunConfig, output_dir: Path, vllm_url: str | None) -> Any:
    from worker.training.harness import build_harness_trainer

    source, hub_token = run_model_source(run, config)
    environment = Environment.objects.get(pk=config.environments[0].environment)
    return build_harness_trainer(
        run, config, output_dir, model_source=source, hub_token=hub_token, vllm_server_base_url=vllm_url,
        tasks=harbor.task_rows(environment.metadata, dataset=config.harness.dataset)
        if config.harness is not None else [],
    )


def _warmup_phase(run: Run, config: RunConfig, lease_owner: str, warmup_dir: Path) -> str | None:
    """Run the SFT warm-up (worker/training/warmup.py) under its own telemetry sink, closed (flushed)
    before GRPO's opens, so no SFT step lands after GRPO's step counter restarts. Returns
    None when GRPO follows, else how the run ended (recorded here)."""
    from worker.episodes import tool_schemas
    from worker.training.warmup import WarmupResult, run_warmup

    if not run_phase_set(run_id=run.pk, lease_owner=lease_owner, phase=Run.Phase.WARMUP, step=0):
        return "lease_lost"
    sink = TelemetrySink(
        run_id=run.pk, lease_owner=lease_owner, heartbeat_seconds=settings.ENVLAB_HEARTBEAT_SECONDS,
        max_pending=settings.ENVLAB_TELEMETRY_MAX_PENDING, outage_seconds=settings.ENVLAB_TELEMETRY_OUTAGE_SECONDS,
    )
    result: WarmupResult | None = None
    status, error, failure = Run.Status.SUCCEEDED, "", ""
    try:
        try:
            source, hub_token = run_model_source(run, config)
        except Exception as exc:
            mark_failure(exc, Run.Failure.MODEL)
            raise
        with outage_alerts(sink):
            factory, _task_rows = environment_factory(config, run.owner)
            # The tools as GRPO offers them (every environment's, through the router).
            tools = tool_schemas(factory())
            result = run_warmup(
                run=run, config=config, sink=sink, model_source=source, tools=tools, target=warmup_dir,
                hub_token=hub_token,
            )
        if result.outcome == "cancelled":
            status = Run.Status.CANCELLED
        elif result.outcome == "telemetry_failed":
            status, error = Run.Status.INTERRUPTED, sink.failure
        elif result.outcome == "no_episodes":
            assert config.sft_warmup is not None
            rounds = (config.grpo or GRPOSettings()).max_tool_calling_iterations
            source = (
                f"; the solver plays at most {rounds} tool calls an episode, as many as GRPO's "
                "max_tool_calling_iterations gives the model: raise it if the games are longer"
                if config.sft_warmup.source == "solver" else ""
            )
            status, error, failure = Run.Status.FAILED, (
                f"the warm-up kept no episode: none of {result.episodes_seen} had a reward of at least "
                f"{config.sft_warmup.min_reward:g}{source}"
            ), Run.Failure.CONFIG
    except Exception as exc:
        interrupted = outage_end(exc, checkpoint_step=None)
        if outage_wait_stopped(exc):  # a lost lease is seen below
            status, error = Run.Status.CANCELLED, "cancelled while waiting for an environment server"
        else:
            status, error, failure = _phase_end(exc, run.pk, config, interrupted=interrupted, step=None, phase="warmup")
    finally:
        written = sink.close(timeout=_close_timeout())
        if not written:
            log.error("run %s: warm-up telemetry not fully written", run.pk)
    if sink.lease_lost.is_set() or (result is not None and result.outcome == "lease_lost"):
        return "lease_lost"
    if not written and status in (Run.Status.SUCCEEDED, Run.Status.CANCELLED):
        # Its model may be whole, but not what it recorded: without the model, resume does
        # the warm-up again (train() redoes a warm-up whose model is absent).
        shutil.rmtree(warmup_dir, ignore_errors=True)
        result = None
        status, error = Run.Status.INTERRUPTED, _unwritten_error(sink)
    data = {"warmup": result.as_dict() if result is not None else None, "telemetry": sink.stats}
    if result is not None and result.outcome == "done":
        run_warmup_done(run_id=run.pk, lease_owner=lease_owner, data=result.as_dict())
        if config.grpo is not None:
            return None
    finish_run(
        run_id=run.pk, lease_owner=lease_owner, status=status, error=error, step=sink.step, data=data, failure=failure
    )
    return status
