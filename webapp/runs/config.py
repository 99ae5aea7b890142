"""The one schema of a run's configuration: used by the form, the API and the worker.

Pure pydantic: structural rules live here; rules that need the database or the disk
(does the environment exist, is it healthy, is the model there) live in
`webapp.runs.services.run_config_check`.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StringConstraints,
    Tag,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from envs.rows import RESERVED_RESET_KEYS
from webapp.core.errors import InvalidInput
from webapp.core.textcheck import json_object_errors

# The one registry of reward terms (webapp/rewards/terms.py); RewardTerm is re-exported here.
from webapp.rewards.terms import RecipeRef, RewardTerm, TermFieldError, terms_error
from webapp.runs.grpo_fields import ASYNC_REFUSED, CPU_REFUSED, TRL_PASSTHROUGH, TRLTrainingFields

MODEL_DEMO_RE = re.compile(r"^demo:[a-z0-9][a-z0-9-]{0,62}$")
MODEL_HUB_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")

# What one run may ask for. Each bound keeps one request within what one worker machine
# and the environment servers can take: rows and prompts are built in the worker's memory,
# and every rollout of a generation batch holds one environment session at once.
MAX_GENERATION_BATCH = 256  # per_device_train_batch_size x gradient_accumulation_steps
MAX_TOTAL_ROWS = 50_000  # dataset rows summed over the run's environments
MAX_PROMPT_CHARS_TOTAL = 20_000_000  # rows x prompt length, summed over environments
MAX_ORS_TASKS = 10_000  # Open Reward Standard tasks one environment of a run may list
MAX_STEPS = 10_000
MAX_COMPLETION_LENGTH = {"cpu": 2048, "cuda": 16384}
MAX_CPU_PROCESSES = 4  # training processes of a run on device "cpu"
# chat_template_kwargs reach the tokenizer's Jinja chat template as variables: only the
# switches chat templates read (Qwen3/GLM/SmolLM3 `enable_thinking`, Granite/DeepSeek
# `thinking`, gpt-oss `reasoning_effort`). Never `chat_template` itself, which would run a
# user's template in the worker.
CHAT_TEMPLATE_KWARGS: dict[str, tuple[Any, ...]] = {
    "enable_thinking": (True, False),
    "thinking": (True, False),
    "reasoning_effort": ("low", "medium", "high"),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


ResetValue = Annotated[str, StringConstraints(max_length=1000)] | int | float | bool


class RunEnvironment(_Strict):
    environment: int = Field(description="Id of a registered environment.")
    name: str = Field(default="", max_length=64, description="Name of this environment within the run.")
    prompt: str = Field(
        default="",
        max_length=4000,
        description="User prompt of each episode; an Open Reward Standard task brings its own when empty.",
    )
    rows: int = Field(default=64, ge=1, le=MAX_TOTAL_ROWS, description="Dataset rows for this environment.")
    reset: dict[str, ResetValue] = Field(
        default_factory=dict,
        max_length=16,
        description="Extra arguments for every episode's reset, e.g. {\"blanks\": 20} for sudoku.",
    )
    split: str = Field(default="train", max_length=64, description="Open Reward Standard: the task split.")
    num_tasks: int | None = Field(default=None, ge=1, le=MAX_ORS_TASKS, description="ORS: the first N tasks.")
    indices: list[int] | None = Field(
        default=None, max_length=MAX_ORS_TASKS, description="ORS: these task indices."
    )

    @field_validator("reset")
    @classmethod
    def _reset_keys(cls, value: dict[str, ResetValue]) -> dict[str, ResetValue]:
        for key in value:
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", key):
                raise ValueError(f"reset argument '{key[:40]}' must be a lowercase identifier")
            if key in RESERVED_RESET_KEYS:
                raise ValueError(f"reset argument '{key}' is set by envlab itself")
        return value

    @field_validator("indices")
    @classmethod
    def _indices_non_negative(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(i < 0 for i in value):
            raise ValueError("task indices start at 0")
        return value

    @property
    def row_count(self) -> int:
        """Rows this environment adds to the dataset: its ORS tasks when they are chosen,
        else `rows` (an ORS environment that chooses none lists at most MAX_ORS_TASKS)."""
        if self.indices is not None:
            return len(self.indices)
        return self.num_tasks if self.num_tasks is not None else self.rows

    @field_validator("name")
    @classmethod
    def _name_is_slug(cls, value: str) -> str:
        if value and not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", value):
            raise ValueError("use lowercase letters, digits, '-' and '_'")
        return value


class CheckpointRef(_Strict):
    """A model trained here: a run's checkpoint (step 0: its warm-up's result) or its newest."""

    run: int = Field(ge=1, description="Id of a run whose checkpoint to start from.")
    checkpoint: int | Literal["last"] = Field(
        default="last", description='A checkpoint step (0: the warm-up\'s model), or "last" for the newest.'
    )

    @field_validator("checkpoint", mode="before")
    @classmethod
    def _step_or_last(cls, value: Any) -> Any:
        # Before the union, so a bad value gets one message rather than one per member.
        if value == "last" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            return value
        raise ValueError('a checkpoint is a step (0 or more; 0 is the warm-up\'s model) or "last"')


def _model_kind(value: Any) -> str:
    return "ref" if isinstance(value, dict | CheckpointRef) else "name"


# Tagged, so an error names the member the input was meant for, not every member.
ModelSpec = Annotated[
    Annotated[Annotated[str, StringConstraints(min_length=1, max_length=500)], Tag("name")]
    | Annotated[CheckpointRef, Tag("ref")],
    Discriminator(_model_kind),
]
UNION_TAGS = ("name", "ref")


def _rewards_kind(value: Any) -> str:
    return "recipe" if isinstance(value, dict | RecipeRef) else "terms"


# `rewards`: a list of terms, or {"recipe": <id>} (resolved at launch, webapp.runs.services).
RewardsSpec = Annotated[
    Annotated[list[RewardTerm], Field(min_length=1, max_length=32), Tag("terms")]
    | Annotated[RecipeRef, Tag("recipe")],
    Discriminator(_rewards_kind),
]
REWARDS_TAGS = ("terms", "recipe")


class GRPOSettings(TRLTrainingFields, _Strict):
    """GRPO training: the lab's core settings, and the allowlisted GRPOConfig fields
    (webapp/runs/grpo_fields.py), all GRPOConfig fields of the same name."""

    num_generations: int = Field(default=4, ge=2, le=64)
    max_steps: int = Field(default=20, ge=1, le=MAX_STEPS)
    learning_rate: float = Field(default=1e-5, gt=0, le=1)
    per_device_train_batch_size: int = Field(default=4, ge=1, le=MAX_GENERATION_BATCH)
    gradient_accumulation_steps: int = Field(default=1, ge=1, le=MAX_GENERATION_BATCH)
    max_completion_length: int = Field(default=256, ge=8, le=MAX_COMPLETION_LENGTH["cuda"])
    max_tool_calling_iterations: int = Field(default=4, ge=1, le=64)
    beta: float = Field(default=0.0, ge=0, le=10)
    temperature: float = Field(default=1.0, gt=0, le=5)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    save_steps: int = Field(default=5, ge=1, le=MAX_STEPS, description="Checkpoint every N steps.")
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=lambda: {"enable_thinking": False},
        description=f"Chat template switches: {', '.join(sorted(CHAT_TEMPLATE_KWARGS))}.",
    )

    @field_validator("chat_template_kwargs")
    @classmethod
    def _chat_template_kwargs_allowed(cls, value: dict[str, Any]) -> dict[str, Any]:
        allowed = ", ".join(sorted(CHAT_TEMPLATE_KWARGS))
        for key, item in value.items():
            choices = CHAT_TEMPLATE_KWARGS.get(key)
            if choices is None:
                raise ValueError(f"'{key[:40]}' is not a chat template switch envlab passes on; allowed keys: {allowed}")
            # `1 in (True, False)` holds in Python: compare types too.
            if not any(type(item) is type(c) and item == c for c in choices):
                shown = ", ".join(json.dumps(c) for c in choices)
                raise ValueError(f"'{key}' takes one of {shown}")
        return value

    @property
    def generation_batch_size(self) -> int:
        # One process: TRL generates per_device_train_batch_size * steps_per_generation
        # completions at once, and steps_per_generation defaults to the accumulation steps.
        return self.per_device_train_batch_size * self.gradient_accumulation_steps

    @model_validator(mode="after")
    def _generations_divide_batch(self) -> GRPOSettings:
        if self.generation_batch_size > MAX_GENERATION_BATCH:
            raise _FieldError(
                "per_device_train_batch_size",
                f"the generation batch per_device_train_batch_size x gradient_accumulation_steps "
                f"({self.per_device_train_batch_size} x {self.gradient_accumulation_steps} "
                f"= {self.generation_batch_size}) is at most {MAX_GENERATION_BATCH}",
            )
        if self.generation_batch_size % self.num_generations:
            raise _FieldError(
                "num_generations",
                f"num_generations ({self.num_generations}) must divide the generation batch "
                f"size per_device_train_batch_size x gradient_accumulation_steps "
                f"({self.per_device_train_batch_size} x {self.gradient_accumulation_steps} "
                f"= {self.generation_batch_size})",
            )
        return self


MAX_WARMUP_EPISODES = 4096
MAX_WARMUP_EPOCHS = 100


class WarmupSettings(_Strict):
    """An SFT warm-up before GRPO (worker/training/warmup.py): good episodes, played by the bundled
    environment's solver or kept from an earlier run's rollouts, trained with TRL's SFTTrainer
    on the assistant turns only. Its model is the run's checkpoint 0, where GRPO starts."""

    kind: Literal["sft"] = "sft"
    source: Literal["solver", "run"] = Field(
        description='"solver": episodes played by the environment\'s solver; "run": rollouts of run `run`.'
    )
    run: int | None = Field(default=None, ge=1, description='Id of the run whose rollouts to keep (source "run").')
    min_reward: float = Field(default=1.0, ge=-1e6, le=1e6, description="Keep episodes with at least this reward.")
    episodes: int = Field(
        default=64, ge=1, le=MAX_WARMUP_EPISODES,
        description="Solver: episodes to play; run: the newest kept rollouts to use, at most.",
    )
    epochs: int = Field(default=2, ge=1, le=MAX_WARMUP_EPOCHS)
    learning_rate: float = Field(default=1e-4, gt=0, le=1)
    per_device_train_batch_size: int = Field(default=8, ge=1, le=MAX_GENERATION_BATCH)
    max_length: int = Field(default=2048, ge=64, le=MAX_COMPLETION_LENGTH["cuda"], description="Tokens per episode.")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _run_for_run_source(self) -> WarmupSettings:
        if self.source == "run" and self.run is None:
            raise _FieldError("run", 'source "run" needs the id of the run whose rollouts to keep')
        if self.source == "solver" and self.run is not None:
            raise _FieldError("run", 'only source "run" takes a run; the solver plays its own episodes')
        return self

    @property
    def max_steps(self) -> int:
        """Optimizer steps at most: every episode kept, every epoch."""
        return -(-self.episodes // self.per_device_train_batch_size) * self.epochs


MAX_HARBOR_TASKS = 10_000


class HarnessSettings(_Strict):
    """A harness run: a loop-owning agent served by an OpenEnv Harbor server plays every rollout
    in its sandbox (TRL's AsyncGRPOTrainer with OpenEnv's harness rollout worker,
    worker/training/harness.py); the lab samples its turns through vLLM and trains on them. The run's one
    environment is the Harbor server; the reward recipe scores the harness outcome."""

    dataset: str = Field(min_length=1, max_length=500, description="A dataset (split) the Harbor server lists.")
    harness: str = Field(min_length=1, max_length=100, description="A harness the Harbor server offers.")
    sandbox: str = Field(default="docker", min_length=1, max_length=60, description="A sandbox the server has.")
    tasks: int = Field(default=64, ge=1, le=MAX_HARBOR_TASKS, description="Tasks of the dataset to train on, from the first.")
    max_concurrent_rollouts: int = Field(
        default=4, ge=1, le=256,
        description="Rollouts in flight at once (the async trainer's max_inflight_tasks); the server needs one more session.",
    )
    max_staleness: int = Field(default=4, ge=1, le=64, description="Policy versions a rollout may lag before it is dropped.")
    weight_sync_steps: int = Field(default=1, ge=1, le=1000, description="Training steps between weight syncs to vLLM.")
    agent_timeout_sec: float = Field(default=0.0, ge=0, le=86_400, description="The agent's time limit; 0: the task's own.")
    agent_step_limit: int = Field(default=0, ge=0, le=100_000, description="Model calls per rollout at most; 0: no cap.")


AlertKind = Literal[
    "nonfinite", "zero_variance", "tool_failures", "no_tool_calls", "reward_flat", "entropy_collapse",
    "group_mismatch",
]
ALERT_KINDS: tuple[str, ...] = AlertKind.__args__  # type: ignore[attr-defined]
# What a run tells its owner's notification URL about (webapp/runs/telemetry/notify.py): "finished" is a
# run that succeeded, "failed" one that failed, "alert" any run-health alert raised.
NotifyEvent = Literal["finished", "failed", "alert"]
NOTIFY_EVENTS: tuple[str, ...] = NotifyEvent.__args__  # type: ignore[attr-defined]


# Fresh lists per config, typed as their fields (a lambda's list literal would be list[str]).
def _default_stop_on() -> list[AlertKind]:
    return ["nonfinite"]


def _default_notify() -> list[NotifyEvent]:
    return ["failed", "alert"]


class AlertSettings(_Strict):
    """Run health rules (webapp/runs/telemetry/health.py): thresholds, and which alerts end the run."""

    enabled: bool = True
    zero_variance_frac: float = Field(
        default=0.9, ge=0, le=1, description="Alert when at least this fraction of groups has zero reward std..."
    )
    zero_variance_steps: int = Field(default=5, ge=1, le=MAX_STEPS, description="...for this many steps in a row.")
    tool_failure_rate: float = Field(
        default=0.5, gt=0, le=1, description="Alert when at least this fraction of tool calls fails..."
    )
    tool_failure_steps: int = Field(default=3, ge=1, le=MAX_STEPS, description="...for this many steps in a row.")
    no_tool_calls_steps: int = Field(
        default=5, ge=1, le=MAX_STEPS, description="Alert after this many steps without a tool call."
    )
    reward_flat_steps: int = Field(
        default=20, ge=2, le=1000, description="Alert when the mean reward stays within the tolerance this long."
    )
    reward_flat_tolerance: float = Field(default=1e-3, ge=0, le=1e6)
    entropy_min: float = Field(default=0.01, ge=0, le=100, description="Alert when token entropy stays below this...")
    entropy_steps: int = Field(default=5, ge=1, le=MAX_STEPS, description="...for this many steps in a row.")
    group_mismatch_clear_steps: int = Field(
        default=10, ge=1, le=MAX_STEPS,
        description=(
            "Alert at the first step with a group whose completions started from different observations "
            "(a reset that ignores the seed); clear it after this many steps in a row without one."
        ),
    )
    stop_on: list[AlertKind] = Field(
        default_factory=_default_stop_on,
        max_length=len(ALERT_KINDS),
        description="Alerts that stop the run (status failed, a checkpoint kept, the alert as its error).",
    )
    notify: list[NotifyEvent] = Field(
        default_factory=_default_notify,
        max_length=len(NOTIFY_EVENTS),
        description=(
            "Events sent to the notification URL stored on your account page (`notify_url`): finished, "
            "failed, alert. Nothing is sent while no URL is stored."
        ),
    )


VLLM_PASSTHROUGH = (
    "vllm_gpu_memory_utilization",
    "vllm_tensor_parallel_size",
    "vllm_max_model_length",
    "vllm_enable_sleep_mode",
    "vllm_server_timeout",
    "vllm_importance_sampling_correction",
    "vllm_importance_sampling_mode",
    "vllm_importance_sampling_clip_max",
    "vllm_importance_sampling_clip_min",
)


TRACKERS = ("trackio", "wandb", "mlflow", "tensorboard")
Tracker = Literal["trackio", "wandb", "mlflow", "tensorboard"]
LORA_TARGET_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,63}$")


class PeftSettings(_Strict):
    """LoRA through the `peft` package: the run trains a small adapter on the frozen model instead
    of every weight (TRL's `peft_config`). An SFT warm-up trains the adapter and GRPO continues
    that same adapter; a LoRA run that starts from another LoRA run's checkpoint continues that
    run's adapter (same `r` and `lora_alpha`). Checkpoints hold the adapter alone; an evaluation,
    the arena or a full-weight run that starts from one loads the base model and merges it in."""

    r: int = Field(default=16, ge=1, le=256, description="LoRA rank: the adapter's inner width.")
    lora_alpha: int = Field(default=32, ge=1, le=1024, description="LoRA scaling numerator (scale = lora_alpha / r).")
    lora_dropout: float = Field(default=0.05, ge=0, le=0.5, description="Dropout on the adapter's input.")
    target_modules: Literal["all-linear"] | list[str] = Field(
        default="all-linear",
        description='The layers that get an adapter: "all-linear", or module names such as ["q_proj", "v_proj"].',
    )

    @field_validator("target_modules")
    @classmethod
    def _module_names(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list):
            if not 1 <= len(value) <= 32:
                raise ValueError("give 1 to 32 module names, or \"all-linear\"")
            bad = [name for name in value if not LORA_TARGET_RE.fullmatch(name)]
            if bad:
                raise ValueError(f"not a module name: {bad[0][:70]!r} (letters, digits, '_' and '.')")
        return value

    def label(self) -> str:
        return f"LoRA r={self.r}"


class GenerationSettings(_Strict):
    backend: Literal["transformers", "vllm"] = "transformers"
    vllm_mode: Literal["colocate", "server"] = "colocate"
    # Checked against the outbound-address rules when a run is launched
    # (webapp.runs.services.run_config_check), like an environment's URL.
    vllm_server_base_url: str | None = Field(
        default=None,
        max_length=500,
        description="vllm_mode 'server': an existing vLLM server; unset, the worker starts one on its own GPU.",
    )
    # TRL's own GRPOConfig fields for vLLM, passed through when set (None: TRL's default).
    vllm_gpu_memory_utilization: float | None = Field(default=None, gt=0, le=0.95)
    vllm_tensor_parallel_size: int | None = Field(default=None, ge=1, le=8)
    vllm_max_model_length: int | None = Field(default=None, ge=64, le=1_048_576)
    vllm_enable_sleep_mode: bool | None = None
    vllm_server_timeout: float | None = Field(default=None, gt=0, le=3600)
    vllm_importance_sampling_correction: bool | None = None
    vllm_importance_sampling_mode: (
        Literal["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"] | None
    ) = None
    vllm_importance_sampling_clip_max: float | None = Field(default=None, gt=0, le=1e6)
    vllm_importance_sampling_clip_min: float | None = Field(default=None, ge=0, le=1e6)

    @model_validator(mode="after")
    def _vllm_fields_need_vllm(self) -> GenerationSettings:
        if self.backend != "vllm":
            given = sorted(name for name in VLLM_PASSTHROUGH if getattr(self, name) is not None)
            if self.vllm_server_base_url:
                given.insert(0, "vllm_server_base_url")
            if given:
                raise _FieldError(given[0], f"{', '.join(given)} apply to the vllm backend only")
        if self.vllm_mode == "colocate" and self.vllm_server_base_url:
            raise _FieldError("vllm_server_base_url", "a server URL needs vllm_mode 'server'")
        return self

    @property
    def managed_server(self) -> bool:
        """vLLM in server mode with no URL given: the worker runs the server, on one more GPU."""
        return self.backend == "vllm" and self.vllm_mode == "server" and not self.vllm_server_base_url


DEPRECATED_WARMUP_KEY = "warmup"
DEPRECATIONS = {
    DEPRECATED_WARMUP_KEY: (
        "`warmup` is deprecated: name the SFT warm-up `sft_warmup` (in TRL, warm-up means the learning-rate "
        "warm-up, grpo.warmup_steps). This run took it as `sft_warmup`."
    ),
}


def config_to_store(config: RunConfig) -> dict[str, Any]:
    """The config as Run.config keeps it: the TRL fields (webapp/runs/grpo_fields.py) only where
    the run set them, so a config that sets none is stored as before they existed, and
    comparing runs shows no row per unset field."""
    stored = config.model_dump(mode="json")
    if stored.get("grpo"):
        stored["grpo"] = {
            key: value for key, value in stored["grpo"].items() if not (key in TRL_PASSTHROUGH and value is None)
        }
    return stored


def stored_config_current(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored config (Run.config) with today's key names: `warmup` read as `sft_warmup`."""
    if DEPRECATED_WARMUP_KEY not in stored or "sft_warmup" in stored:
        return stored
    return {("sft_warmup" if key == DEPRECATED_WARMUP_KEY else key): value for key, value in stored.items()}


def has_sft_warmup(stored: dict[str, Any]) -> bool:
    """Whether a stored config (Run.config) has an SFT warm-up, under either name."""
    return bool(stored.get("sft_warmup") or stored.get(DEPRECATED_WARMUP_KEY))


def _deprecated_warmup_schema(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """The OpenAPI body lists `warmup` too, marked deprecated, with sft_warmup's shape."""
    properties = schema.get("properties", {})
    if "sft_warmup" in properties:
        properties[DEPRECATED_WARMUP_KEY] = {
            **properties["sft_warmup"], "deprecated": True, "description": "Deprecated name of `sft_warmup`.",
        }


class RunConfig(BaseModel):
    name: str = Field(min_length=1, max_length=120)
    model: ModelSpec = Field(
        description='A hub id, an absolute local folder, "demo:<name>", or {"run": <id>, "checkpoint": <step>|"last"}.'
    )
    environments: list[RunEnvironment] = Field(min_length=1, max_length=8)
    rewards: RewardsSpec = Field(
        default_factory=lambda: [RewardTerm(name="env_reward", kind="env_reward", weight=1.0)],
        description='A list of reward terms, or {"recipe": <id>} for a saved recipe.',
    )
    sft_warmup: WarmupSettings | None = Field(
        default=None,
        description=f"An SFT warm-up before GRPO; none by default. `{DEPRECATED_WARMUP_KEY}` is its deprecated name.",
    )
    grpo: GRPOSettings | None = Field(
        default_factory=GRPOSettings, description="GRPO training; null for a warm-up alone (needs `sft_warmup`)."
    )
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    report_to: list[Tracker] = Field(
        default_factory=list, max_length=len(TRACKERS),
        description=(
            "Trackers the run also reports to, as TRL's report_to: 'trackio' (the lab's own trackio folder), "
            "'wandb' (offline unless the worker's environment sets WANDB_MODE), 'mlflow' (a folder in the run's "
            "unless MLFLOW_TRACKING_URI is set), 'tensorboard' (a folder in the run's). Credentials come only from "
            "the worker's environment. envlab captures every metric itself either way."
        ),
    )
    peft: PeftSettings | None = Field(
        default=None, description="LoRA: train a PEFT adapter instead of every weight; none (full training) by default."
    )
    harness: HarnessSettings | None = Field(
        default=None, description="A harness run on a Harbor server (TRL's async GRPO trainer); none by default."
    )
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    device: Literal["cpu", "cuda"] = "cpu"
    gpus: int = Field(default=1, ge=1, le=8, description="CUDA devices the run needs (device 'cuda').")
    processes: int | None = Field(
        default=None, ge=1, le=8,
        description=(
            "Training processes, data parallel through accelerate: each plays and trains its own share "
            "of the generation batch. Default: one per GPU on 'cuda' (gpus), one on 'cpu' (gloo between "
            f"processes, at most {MAX_CPU_PROCESSES})."
        ),
    )
    wait_for_worker: bool = Field(
        default=False,
        description="Queue the run even when no worker seen lately can carry it (instead of refusing it).",
    )
    # Deprecated keys the input used (`warmup`), for the launch to warn about.
    _deprecated_keys: list[str] = PrivateAttr(default_factory=list)

    model_config = ConfigDict(extra="forbid", json_schema_extra=_deprecated_warmup_schema)

    @model_validator(mode="wrap")
    @classmethod
    def _accept_deprecated_warmup(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> RunConfig:
        """`warmup` is the old name of `sft_warmup` (in TRL, "warmup" is the learning-rate warm-up):
        still accepted, and stored configs that have it keep loading."""
        legacy = isinstance(data, dict) and DEPRECATED_WARMUP_KEY in data
        if legacy:
            if "sft_warmup" in data:
                raise _FieldError(
                    DEPRECATED_WARMUP_KEY, "`warmup` is the deprecated name of `sft_warmup`: give only `sft_warmup`"
                )
            data = {("sft_warmup" if key == DEPRECATED_WARMUP_KEY else key): value for key, value in data.items()}
        config: RunConfig = handler(data)
        if legacy:
            config._deprecated_keys = [DEPRECATED_WARMUP_KEY]
        return config

    @property
    def deprecations(self) -> dict[str, list[str]]:
        """What the input said in a deprecated way, by key (the launch's warnings)."""
        return {key: [DEPRECATIONS[key]] for key in self._deprecated_keys}

    @field_validator("model")
    @classmethod
    def _model_form(cls, value: str | CheckpointRef) -> str | CheckpointRef:
        if isinstance(value, CheckpointRef):
            return value
        value = value.strip()
        if value.startswith("demo:"):
            if not MODEL_DEMO_RE.fullmatch(value):
                raise ValueError("a demo model is 'demo:<name>' with lowercase letters, digits and '-'")
        elif not (value.startswith("/") or MODEL_HUB_RE.fullmatch(value)):
            raise ValueError("give a hub id 'org/name', an absolute local folder, or 'demo:<name>'")
        return value

    @model_validator(mode="after")
    def _names_unique(self) -> RunConfig:
        for index, env in enumerate(self.environments):
            if not env.name:
                env.name = f"env{index}" if len(self.environments) > 1 else "env"
        env_names = [env.name for env in self.environments]
        if len(set(env_names)) != len(env_names):
            raise _FieldError("environments", "environment names within a run must be unique")
        terms = self.rewards if isinstance(self.rewards, list) else self.rewards.terms
        broken = terms_error(terms, env_names=env_names) if terms is not None else None
        if broken is not None:
            where = "rewards" if isinstance(self.rewards, list) else "rewards.terms"
            raise _FieldError(f"{where}.{broken[0]}".rstrip("."), broken[1])
        if self.gpus > 1 and self.device != "cuda":
            raise _FieldError("gpus", "more than one GPU needs device 'cuda'")
        if self.processes is not None:
            if self.device == "cuda" and self.processes != self.gpus:
                raise _FieldError(
                    "processes", f"on device 'cuda' a run trains one process per GPU: processes must equal gpus ({self.gpus})"
                )
            if self.device == "cpu" and self.processes > MAX_CPU_PROCESSES:
                raise _FieldError("processes", f"at most {MAX_CPU_PROCESSES} training processes on device 'cpu'")
        if self.generation.backend == "vllm" and self.device != "cuda":
            raise _FieldError("generation", "the vllm backend needs device 'cuda'")
        rows = sum(env.row_count for env in self.environments)
        if rows > MAX_TOTAL_ROWS:
            raise _FieldError(
                "environments",
                f"the run's environments ask for {rows} rows (rows, or ORS num_tasks/indices) in all; "
                f"at most {MAX_TOTAL_ROWS}",
            )
        chars = sum(env.rows * len(env.prompt) for env in self.environments)
        if chars > MAX_PROMPT_CHARS_TOTAL:
            raise _FieldError(
                "environments",
                f"rows x prompt length is {chars} characters in all; at most {MAX_PROMPT_CHARS_TOTAL} "
                "(fewer rows or a shorter prompt)",
            )
        if self.grpo is None and self.sft_warmup is None:
            raise _FieldError("grpo", "grpo may be null only for a run with a warm-up: give `sft_warmup` or `grpo`")
        if self.grpo is not None and self.device == "cpu":
            for name, why in CPU_REFUSED.items():
                if getattr(self.grpo, name):
                    raise _FieldError(f"grpo.{name}", why)
        if self.harness is not None:
            self._harness_rules()
        if len(set(self.report_to)) != len(self.report_to):
            raise _FieldError("report_to", "name each tracker once")
        if self.report_to and self.harness is not None:
            raise _FieldError("report_to", "a harness run reports only to envlab for now")
        if self.peft is not None:
            if self.harness is not None:
                raise _FieldError("peft", "a harness run trains every weight: LoRA is not available there yet")
        longest = MAX_COMPLETION_LENGTH[self.device]
        if self.grpo is not None and self.grpo.max_completion_length > longest:
            raise _FieldError(
                "grpo.max_completion_length",
                f"max_completion_length is at most {longest} tokens on device '{self.device}'",
            )
        return self

    def _harness_rules(self) -> None:
        """What TRL's async trainer needs: one Harbor environment, a vLLM server to sample from,
        GRPO and no warm-up, and no KL term (AsyncGRPOConfig has no `beta`)."""
        if len(self.environments) != 1:
            raise _FieldError("environments", "a harness run has one environment: the Harbor server")
        if self.sft_warmup is not None:
            raise _FieldError("sft_warmup", "a harness run has no SFT warm-up")
        if self.grpo is None:
            raise _FieldError("grpo", "a harness run trains with GRPO: give `grpo`")
        if self.ranks > 1:
            raise _FieldError(
                "gpus" if self.device == "cuda" else "processes",
                "a harness run trains in one process on one GPU (the async GRPO trainer is not run data parallel here)",
            )
        if self.grpo.beta:
            raise _FieldError("grpo.beta", "the async GRPO trainer of a harness run has no KL term: beta must be 0")
        for name in ASYNC_REFUSED:
            if getattr(self.grpo, name) is not None:
                raise _FieldError(f"grpo.{name}", f"the async GRPO trainer of a harness run has no {name}: leave it out")
        if self.device != "cuda" or self.generation.backend != "vllm" or self.generation.vllm_mode != "server":
            raise _FieldError(
                "generation",
                "a harness run samples through a vLLM server: device 'cuda', backend 'vllm', vllm_mode 'server'",
            )

    @property
    def seed(self) -> int:
        """The seed of the run's rows: GRPO's, or the warm-up's for a warm-up alone."""
        if self.grpo is not None:
            return self.grpo.seed
        return self.sft_warmup.seed if self.sft_warmup is not None else 0

    @property
    def ranks(self) -> int:
        """How many training processes the run's GRPO phase has (worker/training/distributed.py)."""
        if self.processes is not None:
            return self.processes
        return self.gpus if self.device == "cuda" else 1

    @property
    def total_steps(self) -> int:
        """What Run.max_steps counts: GRPO's steps, or the warm-up's most for a warm-up alone."""
        if self.grpo is not None:
            return self.grpo.max_steps
        return self.sft_warmup.max_steps if self.sft_warmup is not None else 0


class _FieldError(ValueError):
    """A cross-field rule that failed, reported against one field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class RunConfigError(InvalidInput):
    """A run configuration was rejected; `errors` maps dotted field paths to messages."""


def _union_tag(parent: Any, part: Any) -> bool:
    """A tagged union's branch name in an error's location, left out of the dotted path."""
    return (parent == "model" and part in UNION_TAGS) or (parent == "rewards" and part in REWARDS_TAGS)


def parse_run_config(data: Any) -> RunConfig:
    """Validate raw input (dict from JSON or a form) into a RunConfig, or raise RunConfigError."""
    if refused := json_object_errors(data):
        raise RunConfigError(refused)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        errors: dict[str, list[str]] = {}
        for error in exc.errors():
            ctx_error = (error.get("ctx") or {}).get("error")
            loc = [p for i, p in enumerate(error["loc"]) if not (i and _union_tag(error["loc"][i - 1], p))]
            if isinstance(ctx_error, _FieldError | TermFieldError):
                prefix = ".".join(str(p) for p in loc)
                key = f"{prefix}.{ctx_error.field}" if prefix else ctx_error.field
                errors.setdefault(key, []).append(ctx_error.message)
                continue
            key = ".".join(str(p) for p in loc) or "non_field_errors"
            message = error["msg"].removeprefix("Value error, ")
            errors.setdefault(key, []).append(message)
        legacy = DEPRECATED_WARMUP_KEY in data and "sft_warmup" not in data
        raise RunConfigError(in_keys_given(errors, legacy_warmup=legacy)) from None


def in_keys_given(errors: dict[str, list[str]], *, legacy_warmup: bool) -> dict[str, list[str]]:
    """Errors under the keys the input used: `warmup.*` for a config that named its SFT
    warm-up by the deprecated key."""
    if not legacy_warmup:
        return errors
    renamed: dict[str, list[str]] = {}
    for key, messages in errors.items():
        head, dot, rest = key.partition(".")
        renamed.setdefault(f"{DEPRECATED_WARMUP_KEY}{dot}{rest}" if head == "sft_warmup" else key, []).extend(messages)
    return renamed
