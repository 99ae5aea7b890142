"""The GRPOConfig / TrainingArguments fields a run may set beyond the lab's core GRPO settings:
an explicit allowlist with TRL's names, types and bounds (checked against the installed trl's
GRPOConfig by tests/worker/training/test_grpo_args.py, so moving the trl pin flags a rename).

Every field defaults to None: absent, it is not passed and TRL's default applies, except
`bf16` and `gradient_checkpointing`, which the lab turns off when absent (worker/training/
grpo_args.py says why). Pure pydantic, no trl import: webapp never imports trl.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
# transformers' SchedulerType values that need nothing more than the step counts: the others
# need `lr_scheduler_kwargs` (cosine_with_min_lr, cosine_warmup_with_min_lr, warmup_stable_decay)
# or an eval metric each step (reduce_lr_on_plateau, greedy), which a run cannot give.
LrSchedulerType = Literal[
    "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup", "inverse_sqrt"
]

# Why each is refused on device "cpu" (webapp.runs.config.RunConfig checks it).
CPU_REFUSED = {
    "bf16": (
        "bf16 mixed precision needs a CUDA GPU here: a run on device 'cpu' trains in fp32. "
        "Set device 'cuda' or leave bf16 out"
    ),
    "gradient_checkpointing": (
        "gradient checkpointing trades compute for GPU memory; a run on device 'cpu' would only get slower. "
        "Set device 'cuda' or leave gradient_checkpointing out"
    ),
}
# What TRL's asynchronous GRPO trainer (a harness run) has no field for.
ASYNC_REFUSED = (
    "loss_type", "delta", "scale_rewards", "num_iterations", "importance_sampling_level",
    "mask_truncated_completions", "multi_objective_aggregation", "top_entropy_quantile", "entropy_coef",
)


class TRLTrainingFields(BaseModel):
    """Fields passed to GRPOConfig under the same name when set (None: not passed)."""

    loss_type: LossType | None = Field(
        default=None,
        description=(
            "How token losses are aggregated: 'dapo' (TRL's default; normalised by the active tokens of the "
            "global batch), 'grpo' (per sequence length), 'dr_grpo' (by a constant, Dr. GRPO), 'bnpo', "
            "'cispo', 'sapo', 'luspo', 'vespo'."
        ),
    )
    epsilon: float | None = Field(default=None, gt=0, le=10, description="Clipping epsilon (TRL's default 0.2).")
    epsilon_high: float | None = Field(
        default=None, gt=0, le=100,
        description="Upper clipping epsilon; absent: equal to epsilon. DAPO recommends 0.28 (cispo: 5.0).",
    )
    delta: float | None = Field(
        default=None, ge=1, le=100,
        description="Two-sided GRPO clipping: the upper bound of the ratio (INTELLECT-2); recommended above 1 + epsilon.",
    )
    scale_rewards: Literal["group", "batch", "none"] | bool | None = Field(
        default=None,
        description=(
            "Scale advantages by the reward std of the 'group' (TRL's default; true), of the 'batch', "
            "or 'none' (false; Dr. GRPO)."
        ),
    )
    num_iterations: int | None = Field(
        default=None, ge=1, le=64, description="Optimisation passes per generation batch (mu; TRL's default 1)."
    )
    importance_sampling_level: Literal["token", "sequence"] | None = Field(
        default=None, description="Importance ratios per 'token' (TRL's default) or per 'sequence' (GSPO)."
    )
    mask_truncated_completions: bool | None = Field(
        default=None, description="Leave completions cut at max_completion_length out of the loss (DAPO; TRL's default false)."
    )
    top_entropy_quantile: float | None = Field(
        default=None, ge=0, le=1,
        description=(
            "Train only on the top fraction of completion tokens by entropy (the decisions, not the "
            "boilerplate; 'Beyond the 80/20 rule' recommends 0.2). TRL's default 1.0: every token."
        ),
    )
    entropy_coef: float | None = Field(
        default=None, ge=0, le=10,
        description=(
            "Entropy bonus: subtract this times the mean token entropy from the loss, against a policy "
            "that stops exploring (TRL's default 0.0: off)."
        ),
    )
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling (TRL's default 1.0: off).")
    top_k: int | None = Field(default=None, ge=0, le=1_000_000, description="Top-k sampling (TRL's default 0: off).")
    min_p: float | None = Field(
        default=None, ge=0, le=1, description="Minimum token probability relative to the likeliest (typical 0.01-0.2)."
    )
    repetition_penalty: float | None = Field(
        default=None, gt=0, le=10, description="Above 1 favours new tokens, below 1 repeats (TRL's default 1.0)."
    )
    lr_scheduler_type: LrSchedulerType | None = Field(
        default=None, description="Learning-rate schedule (TRL's default 'linear')."
    )
    warmup_steps: float | None = Field(
        default=None, ge=0, le=10_000,  # webapp.runs.config.MAX_STEPS
        description=(
            "Learning-rate warm-up: whole steps (1 or more), or below 1 a fraction of the run's steps "
            "(transformers 5 has no warmup_ratio). TRL's default 0."
        ),
    )
    weight_decay: float | None = Field(default=None, ge=0, le=10, description="AdamW weight decay (TRL's default 0.0).")
    max_grad_norm: float | None = Field(
        default=None, ge=0, le=1e6, description="Gradient clipping norm; 0: off (TRL's default 1.0)."
    )
    bf16: bool | None = Field(
        default=None, description="bf16 mixed precision (device 'cuda' only). Absent: off, the lab's default."
    )
    gradient_checkpointing: bool | None = Field(
        default=None,
        description="Recompute activations to save GPU memory (~20% slower; device 'cuda' only). Absent: off, the lab's default.",
    )
    multi_objective_aggregation: Literal["sum_then_normalize", "normalize_then_sum"] | None = Field(
        default=None,
        description=(
            "Several reward terms: sum then normalise (TRL's default), or normalise each term per group "
            "then sum (GDPO)."
        ),
    )

    @field_validator("warmup_steps")
    @classmethod
    def _whole_steps_or_fraction(cls, value: float | None) -> float | None:
        if value is not None and value >= 1 and value != int(value):
            raise ValueError("warmup_steps is a whole number of steps, or a fraction of the run's steps below 1")
        return value


TRL_PASSTHROUGH: tuple[str, ...] = tuple(TRLTrainingFields.model_fields)
