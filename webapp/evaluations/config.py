"""The one schema of an evaluation request (API, form and the run page's "evaluate
checkpoints" all go through it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from envs.registry import SpecTable
from webapp.core.textcheck import json_object_errors
from webapp.runs.config import (
    MODEL_DEMO_RE,
    MODEL_HUB_RE,
    UNION_TAGS,
    CheckpointRef,
    GRPOSettings,
    ModelSpec,
    ResetValue,
    RunConfigError,
    RunEnvironment,
)

MAX_EPISODES = 200
MAX_MODELS = 24
RANDOM = "random"
SOLVER = "solver"
REFERENCE_POLICIES = (SOLVER, RANDOM)
# Tool-calling rounds of an episode when the request states none. The reference policies make
# one call a round, so it caps their calls too (worker/episodes.py stated_iterations).
DEFAULT_MAX_TOOL_CALLING_ITERATIONS = 16

# Prompts for the bundled environments when a request gives none (each one's lab spec); the text `reset` returns
# (the board, the rules) is appended to it, as in training.
DEFAULT_PROMPTS: Mapping[str, str] = SpecTable(lambda spec: spec.prompt)  # envs/<key>/lab.py


class EvaluationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    environment: int = Field(description="Id of a registered environment.")
    models: list[ModelSpec] = Field(
        min_length=1,
        max_length=MAX_MODELS,
        description='Each a hub id, a folder, "demo:<name>", {"run": <id>, "checkpoint": <step>|"last"}, '
        'or the reference policies "solver" and "random".',
    )
    episodes: int = Field(
        default=10, ge=1, le=MAX_EPISODES, description="Episodes per model (the same for each)."
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Seeds the episodes' rows.")
    episode_seeds: list[Annotated[int, Field(ge=0, le=2**31 - 1)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_EPISODES,
        description="Play exactly these episode seeds (one episode each) instead of drawing "
        "them from `seed`; `episodes` is then their number.",
    )
    prompt: str | None = Field(
        default=None,
        max_length=4000,
        description="Each episode's prompt ({phrase}: a seeded random phrase); bundled environments have a default.",
    )
    max_completion_length: int = Field(default=512, ge=8, le=8192)
    max_tool_calling_iterations: int = Field(
        default=DEFAULT_MAX_TOOL_CALLING_ITERATIONS, ge=1, le=150,
        description="Tool-calling rounds per episode at most (TRL's name); the solver and random "
        "policies, one call a round, make at most this many calls.",
    )
    chat_template_kwargs: dict[str, Any] = Field(default_factory=lambda: {"enable_thinking": False})
    reset: dict[str, ResetValue] = Field(
        default_factory=dict,
        max_length=16,
        description="Extra arguments for every episode's reset, as in a run's environment "
        '(e.g. {"rows": 4, "columns": 3} for catch).',
    )

    @field_validator("reset")
    @classmethod
    def _reset_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        # A run environment's rules for reset arguments (webapp.runs.config).
        try:
            RunEnvironment(environment=1, reset=value)
        except ValidationError as exc:
            raise ValueError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
        return value

    @field_validator("models")
    @classmethod
    def _model_forms(cls, value: list[str | CheckpointRef]) -> list[str | CheckpointRef]:
        # The run config's rules for a model's form (webapp.runs.config RunConfig._model_form),
        # plus the reference policies.
        out: list[str | CheckpointRef] = []
        for index, model in enumerate(value):
            if isinstance(model, str):
                model = model.strip()
                if model.startswith("demo:"):
                    if not MODEL_DEMO_RE.fullmatch(model):
                        raise ValueError(
                            f"models.{index}: a demo model is 'demo:<name>' with lowercase letters, digits and '-'"
                        )
                elif not (
                    model in REFERENCE_POLICIES
                    or model.startswith("/")
                    or MODEL_HUB_RE.fullmatch(model)
                ):
                    raise ValueError(
                        f"models.{index}: give a hub id 'org/name', an absolute local folder, 'demo:<name>', "
                        "'solver' or 'random'"
                    )
            out.append(model)
        return out

    @model_validator(mode="after")
    def _episodes_of_seeds(self) -> EvaluationRequest:
        if self.episode_seeds is not None:
            if "episodes" in self.model_fields_set and self.episodes != len(self.episode_seeds):
                raise ValueError(
                    f"episodes: {self.episodes} given with {len(self.episode_seeds)} episode_seeds; "
                    "leave episodes out or give one seed per episode"
                )
            self.episodes = len(self.episode_seeds)
        return self

    @field_validator("chat_template_kwargs")
    @classmethod
    def _kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        # The same switches a run may pass (one list, in webapp.runs.config).
        try:
            GRPOSettings(chat_template_kwargs=value)
        except ValidationError as exc:
            raise ValueError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
        return value


def parse_evaluation_request(data: Any) -> EvaluationRequest:
    """Validate raw input into an EvaluationRequest, or raise RunConfigError (a 400 naming the field)."""
    if refused := json_object_errors(data):
        raise RunConfigError(refused)
    try:
        return EvaluationRequest.model_validate(data)
    except ValidationError as exc:
        errors: dict[str, list[str]] = {}
        for error in exc.errors():
            loc = [
                p
                for i, p in enumerate(error["loc"])
                if not (i >= 2 and error["loc"][i - 2] == "models" and p in UNION_TAGS)
            ]
            key = ".".join(str(p) for p in loc) or "non_field_errors"
            message = error["msg"].removeprefix("Value error, ")
            if key == "models" and message.startswith("models."):
                key, _, message = message.partition(": ")
            elif key == "non_field_errors" and message.startswith("episodes: "):
                key, _, message = message.partition(": ")
            errors.setdefault(key, []).append(message)
        raise RunConfigError(errors) from None
