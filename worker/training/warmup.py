"""The SFT warm-up of a run (issue 8): good episodes become conversations, TRL's SFTTrainer
trains on their assistant turns, and the result is the run's checkpoint 0, where GRPO starts.

Episodes come from the bundled environment's solver, played against the live environment
through the same adapter TRL gets (worker/episodes.py), or from the stored rollouts of an
earlier run; either way only those with a reward of at least `min_reward` are kept. A
conversation carries the tool calls, the tool results and the tools' JSON schemas, so the
chat template renders exactly the text GRPO's tool loop later shows the model.

Loss on assistant turns only: TRL 1.16's SFTTrainer with `assistant_only_loss=True` renders
with the training twin of a chat template it knows (`{% generation %}` markers, see
trl/chat_templates/*_training.jinja), passed per call; the tokenizer keeps its own template,
which is what is saved with the model (GRPO's tool-call parser recognises templates by text).

Imported only inside the Celery task (torch, transformers and trl at module level).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback

from webapp.runs.config import GRPOSettings, RunConfig, WarmupSettings
from webapp.runs.models import Rollout, Run
from webapp.runs.services import WARMUP_METRIC_PREFIX
from webapp.runs.telemetry.metric_keys import WALL_TIME_KEY
from worker.training.checkpoint_save import fsync_path, fsync_tree

log = logging.getLogger(__name__)

# Metric names of the SFT trainer's logs, recorded under `sft/` (the run page charts them).
SFT_METRICS = (
    "loss",
    "grad_norm",
    "learning_rate",
    "epoch",
    "entropy",
    "mean_token_accuracy",
    "num_tokens",
)

StopReason = Literal["cancelled", "lease_lost", "telemetry_failed"]
Outcome = Literal["done", "no_episodes"] | StopReason


@dataclass
class WarmupResult:
    outcome: Outcome
    episodes_seen: int = 0
    episodes_kept: int = 0
    steps: int = 0
    final_loss: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "episodes_seen": self.episodes_seen,
            "episodes_kept": self.episodes_kept,
            "steps": self.steps,
            "final_loss": self.final_loss,
            **self.details,
        }


# --- the dataset ------------------------------------------------------------------------


def _message(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """One chat message as the SFT dataset stores it: role, text content, and for a tool call
    its arguments as the JSON text the chat template would write (a datasets column merges the
    keys of every row's argument dicts, which would add null arguments to each call)."""
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        return None
    content = message.get("content")
    if isinstance(content, list):  # multimodal parts: keep the text
        content = "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping)
        )
    out: dict[str, Any] = {"role": role, "content": "" if content is None else str(content)}
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            # What transformers' `tojson` filter writes: the rendered text is the same.
            arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
        calls.append(
            {"type": "function", "function": {"name": function["name"], "arguments": arguments}}
        )
    out["tool_calls"] = calls or None
    out["name"] = (
        str(message["name"]) if role == "tool" and message.get("name") is not None else None
    )
    return out


def sft_example(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """A conversation as an SFT row (`messages`, `tools` as JSON text), or None when it has
    no assistant turn to learn from."""
    cleaned = [m for m in (_message(message) for message in messages) if m is not None]
    if not any(m["role"] == "assistant" for m in cleaned):
        return None
    return {"messages": cleaned, "tools": json.dumps(list(tools), ensure_ascii=False)}


def _solver_key(environment: Any) -> str | None:
    from envs.registry import recorded_adapter
    from envs.solvers import solver_class

    spec = recorded_adapter(environment.metadata)
    return spec.key if spec is not None and solver_class(spec.key) is not None else None


def solver_examples(
    *,
    config: RunConfig,
    tools: Sequence[Mapping[str, Any]],
    owner: Any = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> tuple[list[dict[str, Any]], int]:
    """`warmup.episodes` episodes of the run's rows (cycled with fresh seeds when there are
    fewer), each played by its environment's solver against the live server, in at most as
    many calls as the run's GRPO phase gives the model tool-calling rounds; those with a
    reward of at least `min_reward` as SFT rows. Returns (rows, episodes played)."""
    from webapp.catalog.adapters import environment_adapter
    from webapp.catalog.models import Environment
    from worker.datasets import episode_rows
    from worker.episodes import adapter_policy, disconnect, play_episode

    warmup = config.sft_warmup
    assert warmup is not None
    # A longer episode than GRPO lets the model play would teach it moves it never gets to
    # make. A warm-up alone is played as its model is later (GRPO's defaults).
    max_calls = (config.grpo or GRPOSettings()).max_tool_calling_iterations
    adapters: dict[str, Any] = {}
    policies: dict[str, Any] = {}
    for item in config.environments:
        environment = Environment.objects.get(pk=item.environment)
        key = _solver_key(environment)
        if key is None:
            raise ValueError(f"environment '{environment.name}' has no solver to warm up with")
        adapters[item.name] = environment_adapter(environment, owner=owner, env_name=item.name, batch_size=1)()
        policies[item.name] = adapter_policy(adapters[item.name], key=key)
    rows = episode_rows(config)
    rng = random.Random(warmup.seed)
    kept: list[dict[str, Any]] = []
    played = 0
    try:
        for index in range(warmup.episodes):
            if should_stop():
                break
            row = rows[index % len(rows)]
            if index >= len(rows):  # another pass over the rows: other episodes
                row = {**row, "seed": rng.randrange(2**31)}
            adapter = adapters[row["env"]]
            episode = play_episode(adapter=adapter, policy=policies[row["env"]], row=row, max_calls=max_calls)
            played += 1
            if episode.lost or episode.reward < warmup.min_reward:
                continue
            example = sft_example(episode.messages, tools)
            if example is not None:
                kept.append(example)
    finally:
        for adapter in adapters.values():
            disconnect(adapter)
    return kept, played


def run_examples(
    *, warmup: WarmupSettings, tools: Sequence[Mapping[str, Any]], user: Any
) -> tuple[list[dict[str, Any]], int]:
    """The newest `warmup.episodes` scored rollouts of run `warmup.run` (visible to `user`)
    with a reward of at least `min_reward`, as SFT rows. Returns (rows, rollouts read)."""
    from webapp.runs.selectors import runs_visible_to

    source = runs_visible_to(user=user).filter(pk=warmup.run).first() if warmup.run is not None else None
    if source is None:
        raise ValueError(f"no run with id {warmup.run}")
    rollouts = list(
        Rollout.objects.filter(run=source, unscored=False, reward__gte=warmup.min_reward)
        .order_by("-seq")
        .values_list("prompt", "messages")[: warmup.episodes]
    )
    kept = []
    for prompt, messages in reversed(rollouts):
        prompt_messages = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt or [])
        )
        example = sft_example([*prompt_messages, *(messages or [])], tools)
        if example is not None:
            kept.append(example)
    return kept, len(rollouts)


# --- training ---------------------------------------------------------------------------


class WarmupCallback(TrainerCallback):
    """SFT metrics through the run's sink as `sft/*`; the run's cooperative stop at step end
    (cancel, a lost lease, telemetry down), without saving: a stopped warm-up leaves no model
    and a resume redoes it."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.stop_reason: StopReason | None = None
        self.last_loss: float | None = None

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if not logs or "train_runtime" in logs:  # the end-of-training summary repeats the last step
            return
        values: dict[str, Any] = {
            f"{WARMUP_METRIC_PREFIX}{key}": logs[key] for key in SFT_METRICS if key in logs
        }
        if "loss" in logs:
            self.last_loss = float(logs["loss"])
        # No wall time: the GRPO steps of the same numbers own that key.
        values[WALL_TIME_KEY] = None
        self.sink.metrics(state.global_step, values)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.sink.step_done(state.global_step)
        if self.sink.lease_lost.is_set():
            self.stop_reason = "lease_lost"
        elif self.sink.failure_reason():
            self.stop_reason = "telemetry_failed"
        elif self.sink.cancel_requested.is_set():
            self.stop_reason = "cancelled"
        if self.stop_reason:
            control.should_training_stop = True
            control.should_save = False


def _stop_reason(sink: Any) -> StopReason | None:
    if sink.lease_lost.is_set():
        return "lease_lost"
    if sink.failure_reason():
        return "telemetry_failed"
    if sink.cancel_requested.is_set():
        return "cancelled"
    return None


def sft_train(
    *,
    examples: list[dict[str, Any]],
    warmup: WarmupSettings,
    model_source: str,
    output_dir: Path,
    device: str = "cpu",
    callbacks: Sequence[TrainerCallback] = (),
    hub_token: str | None = None,
    peft: Any = None,
) -> tuple[Any, Any, Any]:
    """Train `model_source` on `examples` with TRL's SFTTrainer (assistant turns only).
    Returns (trainer, model, tokenizer); the tokenizer keeps its own chat template.
    `peft`: the run's LoRA settings: the warm-up trains the adapter its GRPO phase continues."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from worker.model_loading import load_for_training

    tokenizer = AutoTokenizer.from_pretrained(model_source, token=hub_token)
    model, peft_config = load_for_training(
        model_source, peft=peft, dtype=torch.float32 if device == "cpu" else "auto", token=hub_token
    )
    args = SFTConfig(
        output_dir=str(output_dir),
        num_train_epochs=warmup.epochs,
        per_device_train_batch_size=warmup.per_device_train_batch_size,
        learning_rate=warmup.learning_rate,
        max_length=warmup.max_length,
        assistant_only_loss=True,
        packing=False,
        seed=warmup.seed,
        logging_steps=1,
        logging_nan_inf_filter=False,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=device == "cpu",
        bf16=False,
        gradient_checkpointing=False,
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        train_dataset=Dataset.from_list(examples),
        callbacks=list(callbacks),
        peft_config=peft_config,
    )
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    return trainer, trainer.model, tokenizer


def save_model(model: Any, tokenizer: Any, target: Path) -> None:
    """Write the model and tokenizer to a sibling staging folder, then rename it to `target`:
    a reader (a resume, a later run's `{"run": id, "checkpoint": 0}`) never sees half a model."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.saving-", dir=target.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        staging.chmod(0o755)
        fsync_tree(staging)  # on disk before the rename makes it the run's model
        if target.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.replace(target, retired / target.name)
            os.replace(staging, target)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(staging, target)
        fsync_path(target.parent)  # and the rename with it
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def run_warmup(
    *,
    run: Run,
    config: RunConfig,
    sink: Any,
    model_source: str,
    tools: Sequence[Mapping[str, Any]],
    target: Path,
    hub_token: str | None = None,
) -> WarmupResult:
    """The whole warm-up of `run`: build the dataset, train, save to `target` (only when it
    ran to the end). Metrics go through `sink`; the caller records the result."""
    warmup = config.sft_warmup
    assert warmup is not None
    if warmup.source == "solver":
        examples, seen = solver_examples(
            config=config,
            tools=tools,
            owner=run.owner,
            should_stop=lambda: _stop_reason(sink) is not None,
        )
    else:
        examples, seen = run_examples(warmup=warmup, tools=tools, user=run.owner)
    stopped = _stop_reason(sink)
    if stopped:
        return WarmupResult(stopped, seen, len(examples))
    sink.metrics(
        0,
        {
            f"{WARMUP_METRIC_PREFIX}episodes_kept": len(examples),
            f"{WARMUP_METRIC_PREFIX}episodes_seen": seen,
            WALL_TIME_KEY: None,
        },
    )
    if not examples:
        return WarmupResult("no_episodes", seen, 0)
    callback = WarmupCallback(sink)
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".sft-", dir=target.parent))
    try:
        trainer, model, tokenizer = sft_train(
            examples=examples,
            warmup=warmup,
            model_source=model_source,
            output_dir=scratch,
            device=config.device,
            callbacks=[callback],
            hub_token=hub_token,
            peft=config.peft,
        )
        steps = int(trainer.state.global_step)
        if callback.stop_reason:
            return WarmupResult(callback.stop_reason, seen, len(examples), steps, callback.last_loss)
        save_model(model, tokenizer, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return WarmupResult("done", seen, len(examples), steps, callback.last_loss)
