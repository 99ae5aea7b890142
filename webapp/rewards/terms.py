"""The one registry of reward term kinds: their typed parameters and how terms nest.

Here, not in the worker, because three places validate the same terms: the run config
(webapp/runs/config.py, used by the form, the API and the worker), the recipes API
(webapp/rewards), and the worker that compiles them (worker/training/rewards.py). Pure pydantic:
no Django, no torch, so every one of them can import it. How a kind scores an episode is
in webapp/rewards/scoring.py (pure too, so a preview in the web process scores the same).

A term is `{name, kind, weight, environments?, params, terms?}`. Leaves score an episode;
containers (`gate`, `sequential`, `weighted_sum`) combine their `terms` with OpenEnv's
rubric semantics (openenv.core.rubrics.containers). Names are unique across the whole tree:
each leaf and each container gets its own `rewards/<name>/mean|std` curve.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from webapp.rewards.expressions import ExpressionError, expression_check

MAX_PARAMS_BYTES = 4096  # a term's params, as compact JSON
MAX_PARAMS_DEPTH = 6
MAX_TREE_DEPTH = 4  # a container inside a container inside ...: levels of terms
MAX_TREE_TERMS = 32  # terms in one recipe, containers included
MAX_CHILDREN = 8

AttributeName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")]
Scale = Annotated[float, Field(ge=-1000, le=1000)]


class TermFieldError(ValueError):
    """A rule about one field of a term that failed, reported against that field
    (webapp.runs.config.parse_run_config and the recipes API turn it into a dotted path)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoParams(_Params):
    pass


class EnvRewardParams(_Params):
    # "result": the adapter's own episode reward (envs.adapters.episode_reward_rule): the sum
    # of the step rewards on third-party OpenEnv servers (until 2026-12 the best one, floored
    # at 0), the last one for catch, sudoku, wordle and ORS, the best one for echo.
    aggregate: Literal["result", "last", "sum", "max"] = "result"


class SuccessBonusParams(_Params):
    speed_bonus: float = Field(default=0.0, ge=-100, le=100)
    steps: AttributeName = Field(
        default="steps", description="The attribute that counts the steps taken."
    )
    max_steps: float | AttributeName | None = Field(
        default=None, description="A number, or the attribute that holds the most steps allowed."
    )

    @model_validator(mode="after")
    def _max_steps_given(self) -> SuccessBonusParams:
        if self.speed_bonus and self.max_steps is None:
            raise TermFieldError(
                "max_steps", "a speed_bonus needs max_steps (a number or an attribute name)"
            )
        if isinstance(self.max_steps, float) and self.max_steps <= 0:
            raise TermFieldError("max_steps", "max_steps must be above 0")
        return self


class PartialCreditParams(_Params):
    attribute: AttributeName
    scale: Scale = 1.0


class PenaltyParams(_Params):
    attribute: AttributeName = "tool_failures"
    scale: Scale = 1.0


class ToolUseParams(_Params):
    tool: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")] | None = (
        None
    )


class LengthParams(_Params):
    min: int = Field(default=0, ge=0, le=1_000_000)
    max: int = Field(ge=1, le=1_000_000)
    unit: Literal["tokens", "characters"] = "tokens"

    @model_validator(mode="after")
    def _band(self) -> LengthParams:
        if self.min > self.max:
            raise TermFieldError("min", f"min ({self.min}) is above max ({self.max})")
        return self


class ComponentParams(_Params):
    source: Literal["rubric_scores", "reward_signals", "calls"]
    name: str = Field(min_length=1, max_length=128)

    @model_validator(mode="after")
    def _calls_name(self) -> ComponentParams:
        if self.source == "calls" and self.name not in ("sum", "last", "max"):
            raise TermFieldError(
                "name", "for source 'calls' (ORS per-call rewards) name is 'sum', 'last' or 'max'"
            )
        return self


class ExpressionParams(_Params):
    expression: str = Field(min_length=1, max_length=500)

    @field_validator("expression")
    @classmethod
    def _safe(cls, value: str) -> str:
        try:
            expression_check(value)
        except ExpressionError as exc:
            raise ValueError(str(exc)) from None
        return value


class GateParams(_Params):
    threshold: float = Field(default=1.0, ge=-1e6, le=1e6)


@dataclass(frozen=True)
class TermKind:
    kind: str
    params: type[_Params]
    description: str
    children: tuple[int, int] = (0, 0)  # how many `terms` a container takes

    @property
    def container(self) -> bool:
        return self.children[1] > 0


KINDS: dict[str, TermKind] = {
    k.kind: k
    for k in (
        TermKind(
            "env_reward", EnvRewardParams, "the environment's own reward (result, last, sum or max)"
        ),
        TermKind("tool_called", NoParams, "1 if at least one tool call succeeded, else 0"),
        TermKind(
            "outcome", NoParams, "the last non-null reward of the episode; None when there is none"
        ),
        TermKind(
            "success_bonus",
            SuccessBonusParams,
            "on a win 1 + speed_bonus x (1 - steps/max_steps), else 0",
        ),
        TermKind("partial_credit", PartialCreditParams, "scale x attribute, only when not won"),
        TermKind("penalty", PenaltyParams, "-scale x attribute (by default per failed tool call)"),
        TermKind(
            "tool_use", ToolUseParams, "1 for a well-formed tool call (or a call of `tool`), else 0"
        ),
        TermKind(
            "length", LengthParams, "1 when the completion's length is within [min, max], else 0"
        ),
        TermKind("component", ComponentParams, "one component the environment reports itself"),
        TermKind("expression", ExpressionParams, "a formula over the episode's attributes"),
        TermKind("gate", GateParams, "its one child's score, 0 below threshold", (1, 1)),
        TermKind(
            "sequential",
            NoParams,
            "0 at the first child scoring 0, else the last child's score",
            (1, MAX_CHILDREN),
        ),
        TermKind(
            "weighted_sum", NoParams, "sum of weight x score over its children", (1, MAX_CHILDREN)
        ),
    )
}
CONTAINERS = frozenset(k for k, v in KINDS.items() if v.container)
Kind = Literal[
    "env_reward", "tool_called", "outcome", "success_bonus", "partial_credit", "penalty", "tool_use",
    "length", "component", "expression", "gate", "sequential", "weighted_sum",
]  # fmt: skip


def _nests_deeper_than(value: Any, limit: int) -> bool:
    """Iterative, so a hostile nesting cannot exhaust the recursion limit."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth + 1 > limit:
                return True
            stack.extend(
                (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
            )
    return False


class RewardTerm(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64)
    kind: Kind = "env_reward"
    weight: float = Field(default=1.0, ge=-100, le=100)
    environments: list[Annotated[str, StringConstraints(max_length=64)]] | None = Field(
        default=None, max_length=8
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description=f"At most {MAX_PARAMS_BYTES} bytes as JSON."
    )
    # A container's children; leaves have none.
    terms: list[RewardTerm] | None = Field(default=None, max_length=MAX_CHILDREN)

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", value):
            raise ValueError("use lowercase letters, digits and '_', starting with a letter")
        return value

    @field_validator("params")
    @classmethod
    def _params_bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        if _nests_deeper_than(value, MAX_PARAMS_DEPTH):
            raise ValueError(f"params nest at most {MAX_PARAMS_DEPTH} levels deep")
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_PARAMS_BYTES:
            raise ValueError(f"params take at most {MAX_PARAMS_BYTES} bytes as JSON, not {size}")
        return value

    @model_validator(mode="after")
    def _kind_rules(self) -> RewardTerm:
        spec = KINDS[self.kind]
        try:
            spec.params.model_validate(self.params)
        except ValidationError as exc:
            first = exc.errors()[0]
            ctx_error = (first.get("ctx") or {}).get("error")
            if isinstance(ctx_error, TermFieldError):
                raise TermFieldError(f"params.{ctx_error.field}", ctx_error.message) from None
            where = ".".join(str(p) for p in first["loc"])
            field = f"params.{where}" if where else "params"
            raise TermFieldError(
                field, f"{self.kind}: {first['msg'].removeprefix('Value error, ')}"
            ) from None
        low, high = spec.children
        count = len(self.terms or [])
        if not spec.container and self.terms is not None:
            raise TermFieldError(
                "terms",
                f"a {self.kind} term has no child terms; only {', '.join(sorted(CONTAINERS))} do",
            )
        if spec.container and not low <= count <= high:
            wanted = f"exactly {low}" if low == high else f"{low} to {high}"
            raise TermFieldError(
                "terms", f"a {self.kind} term takes {wanted} child terms, not {count}"
            )
        if self.kind in ("gate", "sequential"):
            for index, child in enumerate(self.terms or []):
                if child.weight != 1.0:
                    raise TermFieldError(
                        f"terms.{index}.weight",
                        f"a child's weight has no effect in a {self.kind} (OpenEnv's semantics); "
                        "leave it at 1 or put the children in a weighted_sum",
                    )
        return self

    def params_model(self) -> Any:
        """The params as their kind's typed model (validated already)."""
        return KINDS[self.kind].params.model_validate(self.params)


class RecipeRef(BaseModel):
    """`{"recipe": <id>}` in a run config: a saved recipe, resolved when the run launches
    (webapp.runs.services) to the exact version, whose terms are then recorded here."""

    model_config = ConfigDict(extra="forbid")

    recipe: int = Field(ge=1, description="Id of a saved reward recipe of yours.")
    version: int | None = Field(
        default=None, ge=1, description="A version of it; the latest when omitted."
    )
    terms: list[RewardTerm] | None = Field(
        default=None,
        max_length=MAX_TREE_TERMS,
        description="Filled at launch: that version's terms.",
    )


def walk_terms(terms: list[RewardTerm]) -> Iterator[tuple[str, RewardTerm, int]]:
    """Every term of a tree, depth first: (dotted path, term, depth from 1)."""
    stack = [(str(i), t, 1) for i, t in reversed(list(enumerate(terms)))]
    while stack:
        path, term, depth = stack.pop()
        yield path, term, depth
        children = term.terms or []
        stack.extend(
            (f"{path}.terms.{i}", c, depth + 1) for i, c in reversed(list(enumerate(children)))
        )


def terms_error(
    terms: list[RewardTerm], *, env_names: list[str] | None = None
) -> tuple[str, str] | None:
    """The first tree-wide rule `terms` break, as (dotted path, message), or None: unique
    names across the tree, depth, size, and (given the run's) known environment names."""
    if not terms:
        return "", "give at least one reward term"
    seen: dict[str, str] = {}
    count = 0
    for path, term, depth in walk_terms(terms):
        count += 1
        if count > MAX_TREE_TERMS:
            return "", f"a recipe has at most {MAX_TREE_TERMS} terms, containers included"
        if depth > MAX_TREE_DEPTH:
            return path, f"terms nest at most {MAX_TREE_DEPTH} levels deep"
        if term.name in seen:
            return f"{path}.name", f"reward term names must be unique: '{term.name}' is used twice"
        seen[term.name] = path
        if env_names is not None:
            unknown = set(term.environments or []) - set(env_names)
            if unknown:
                return (
                    f"{path}.environments",
                    f"term '{term.name}' names unknown environments {sorted(unknown)}",
                )
    return None


def terms_dump(terms: list[RewardTerm]) -> list[dict[str, Any]]:
    """Terms as stored JSON: defaults left out, so an old config reads back unchanged."""
    return [t.model_dump(mode="json", exclude_none=True) for t in terms]
