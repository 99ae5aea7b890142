"""What the reward composer page needs from the server: the term kinds with their typed
params, the attributes each environment offers, a draft checked exactly as a save checks
it, and a draft scored on one stored training rollout or on one freshly played episode
(a "preview" job, worker/play/preview.py, that scores it with `preview_scores` as here).

The kinds come from the one registry (webapp.rewards.terms.KINDS), the attributes from
envs.adapters.attributes.ATTRIBUTES, the checks from webapp.rewards.services.recipe_parse
and the scores from webapp.rewards.scoring: the page adds no rule of its own.
"""

from __future__ import annotations

import math
from typing import Any, Literal, get_args

from django.contrib.auth.models import AnonymousUser, User
from pydantic import BaseModel, ConfigDict, Field, field_validator

from envs.adapters.attributes import ATTRIBUTES, COMMON
from webapp.catalog.selectors import environments_visible_to
from webapp.evaluations.config import DEFAULT_PROMPTS, parse_evaluation_request
from webapp.evaluations.services import evaluation_check
from webapp.jobs.services import job_create
from webapp.rewards.scoring import Episode, episode_from_stored, recipe_total
from webapp.rewards.services import RecipeRejected, recipe_parse
from webapp.rewards.terms import KINDS, AttributeName, RewardTerm, terms_dump
from webapp.runs.config import RunConfigError
from webapp.runs.models import Rollout
from webapp.workbench.dry_run import EnvName, job_env_name
from webapp.workbench.payload import parse_body

# A draft has no name yet while it is composed; the check then needs one that passes.
DRAFT_NAME = "draft"
PREVIEW_KIND = "preview"
NO_FACTS = "stored before episodes were kept; re-run"
_ATTRIBUTE_PATTERN = next(m.pattern for m in get_args(AttributeName)[1:] if hasattr(m, "pattern"))


def _field(name: str, prop: dict[str, Any], required: bool) -> dict[str, Any]:
    """One param as the page renders it: the input to show and its bounds."""
    branches = prop.get("anyOf") or [prop]
    types = [b.get("type") for b in branches]
    patterns = [b.get("pattern") for b in branches if b.get("type") == "string"]
    if "enum" in prop:
        control = "select"
    elif "number" in types and "string" in types:
        control = "number_or_attribute"
    elif "integer" in types:
        control = "integer"
    elif "number" in types:
        control = "number"
    elif _ATTRIBUTE_PATTERN in patterns:
        control = "attribute"
    else:
        control = "text"
    numeric: dict[str, Any] = next((b for b in branches if b.get("type") in ("number", "integer")), {})
    return {
        "name": name,
        "control": control,
        "required": required,
        "nullable": "null" in types,
        "default": prop.get("default"),
        "options": prop.get("enum"),
        "minimum": numeric.get("minimum"),
        "maximum": numeric.get("maximum"),
        "max_length": next((b.get("maxLength") for b in branches if "maxLength" in b), None),
        "description": prop.get("description", ""),
    }


def kinds_catalog() -> list[dict[str, Any]]:
    """Every term kind: what it scores, whether it holds children (how many), its params'
    JSON schema (pydantic) and the same params as form fields."""
    out = []
    for kind in KINDS.values():
        schema = kind.params.model_json_schema()
        required = set(schema.get("required", []))
        out.append(
            {
                "kind": kind.kind,
                "description": kind.description,
                "container": kind.container,
                "children": {"min": kind.children[0], "max": kind.children[1]},
                "schema": schema,
                "fields": [
                    _field(name, prop, name in required)
                    for name, prop in schema.get("properties", {}).items()
                ],
            }
        )
    return out


def environment_attributes(*, user: User | AnonymousUser) -> dict[str, Any]:
    """The attributes per bundled environment kind, and the user's environments with the
    kind their registration recorded (others offer the attributes every adapter reports)."""
    from envs.registry import recorded_adapter

    environments = []
    for environment in environments_visible_to(user=user).order_by("name")[:200]:
        spec = recorded_adapter(environment.metadata)
        key = spec.key if spec is not None and spec.key in ATTRIBUTES else ""
        environments.append({"id": environment.pk, "name": environment.name, "key": key})
    return {
        "environments": environments,
        "attributes": {
            key: [{"name": n, "description": d} for n, d in rows]
            for key, rows in {**ATTRIBUTES, "": COMMON}.items()
        },
    }


def composer_catalog(*, user: User | AnonymousUser) -> dict[str, Any]:
    return {"kinds": kinds_catalog(), **environment_attributes(user=user)}


def _draft(data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    body = dict(data)
    if "name" not in body:
        body["name"] = DRAFT_NAME
    return body


def draft_errors(data: Any) -> list[dict[str, str]]:
    """A draft `{name?, description?, terms}` checked exactly as saving it would be (the
    owner's other recipe names aside): each problem as {path, message}, path dotted like
    `terms.0.terms.1.params.scale` ("" for the draft as a whole)."""
    try:
        recipe_parse(_draft(data))
    except RecipeRejected as exc:
        return [
            {"path": "" if key == "non_field_errors" else key, "message": message}
            for key, messages in exc.errors.items()
            for message in messages
        ]
    return []


class RolloutRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: int = Field(ge=1, le=2**53, description="Id of one of your runs.")
    seq: int | None = Field(
        default=None, ge=0, le=2**63 - 1, description="Its rollout's seq; the newest when omitted."
    )


class PlayRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    environment: int = Field(ge=1, le=2**53, description="Id of a registered environment.")
    policy: Literal["solver", "random"] = Field(
        default="solver", description="The reference policy that plays the episode."
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Seeds the episode's row.")
    prompt: str | None = Field(
        default=None, max_length=4000, description="The episode's prompt; bundled environments have a default."
    )
    name: EnvName | None = None

    @field_validator("prompt")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        if value is not None and "\x00" in value:
            raise ValueError("a prompt cannot hold NUL characters")
        return value


class PreviewIn(BaseModel):
    """Either `rollout` (a stored episode, scored now: 200) or `play` (a fresh one, played
    by a job: 202)."""

    model_config = ConfigDict(extra="forbid")

    terms: list[Any] = Field(description="The draft's terms, as a recipe takes them.")
    rollout: RolloutRef | None = None
    play: PlayRef | None = None


def _finite(value: float | None) -> float | None:
    """JSON has no infinity: a score that overflowed shows as not applicable."""
    return value if value is not None and math.isfinite(value) else None


def _tree(
    terms: list[RewardTerm], values: dict[str, float | None], env: str, applies: bool, combine: str
) -> list[dict[str, Any]]:
    """`applies`: whether the parent applied (a subtree limited away does not, whatever its
    own limits say)."""
    nodes = []
    for term in terms:
        value = _finite(values.get(term.name))
        here = applies and (not term.environments or env in term.environments)
        nodes.append(
            {
                "name": term.name,
                "kind": term.kind,
                "weight": term.weight,
                "environments": term.environments,
                "applies": here,
                "value": value,
                # What this node adds to its parent: weight x value in a weighted sum (the
                # top level is one); a gate or sequential passes a child's score through.
                "contribution": (
                    _finite(term.weight * value) if combine == "weighted_sum" and value is not None else None
                ),
                "params": term.params,
                "children": _tree(term.terms or [], values, env, here, term.kind),
            }
        )
    return nodes


def preview_scores(terms: list[RewardTerm], episode: Episode) -> dict[str, Any]:
    """The draft's `terms` on one episode: `{total, values, tree}`, each term's value by name
    and the tree the total came out of. The stored-rollout preview and the fresh-episode
    preview job (worker/play/preview.py) both answer with this."""
    values: dict[str, float | None] = {}
    total = recipe_total(terms, episode, values)
    return {
        "total": _finite(total),
        "values": {name: _finite(value) for name, value in values.items()},
        "tree": _tree(terms, values, episode.env_name, not episode.lost, "weighted_sum"),
    }


def _request(data: Any) -> PreviewIn:
    request = parse_body(PreviewIn, data, RecipeRejected)
    if request.rollout is not None and request.play is not None:
        raise RecipeRejected({"play": ["give either rollout (a stored episode) or play (a fresh one), not both"]})
    if request.rollout is None and request.play is None:
        raise RecipeRejected({"rollout": ["Field required"]})
    return request


def preview_wants_play(data: Any) -> bool:
    """Whether a preview request asks for a freshly played episode (a job: throttled as a launch)."""
    return isinstance(data, dict) and "play" in data


def draft_preview(*, user: User, data: Any) -> dict[str, Any]:
    """Score one stored training rollout of `user`'s with a draft's terms, from the episode
    facts the run stored: the total, each term's value and the tree it came out of. Raises
    RecipeRejected (a 400 naming the field), or Rollout.DoesNotExist (a 404)."""
    request = _request(data)
    if request.rollout is None:
        raise RecipeRejected({"rollout": ["Field required"]})
    recipe = recipe_parse({"name": DRAFT_NAME, "terms": request.terms})
    # The caller's own runs only: anyone else's rollout is not found, as if it did not exist.
    rollouts = Rollout.objects.filter(run_id=request.rollout.run, run__owner_id=user.pk)
    if request.rollout.seq is not None:
        rollout = rollouts.get(seq=request.rollout.seq)
    else:
        rollout = rollouts.order_by("-seq")[:1].get()
    if not rollout.episode:
        raise RecipeRejected(
            {"rollout": [f"rollout {rollout.seq} of run {rollout.run_id} was {NO_FACTS}"]}
        )
    episode = episode_from_stored(rollout.env, rollout.episode, rollout.unscored)
    return {
        **preview_scores(recipe.terms, episode),
        "rollout": {
            "run": rollout.run_id,
            "seq": rollout.seq,
            "step": rollout.step,
            "env": rollout.env,
            "unscored": rollout.unscored,
            "stored_reward": rollout.reward,
            "stored_rewards": rollout.rewards,
        },
        "attributes": dict(episode.attributes),
    }


def draft_play_create(*, user: User, data: Any) -> Any:
    """Validate `{terms, play: {environment, policy, seed?, prompt?, name?}}` and queue a
    "preview" job that plays ONE episode with the reference policy on the live environment
    and scores it with the draft (worker/play/preview.py); its result is `{total, values, tree,
    episode, attributes, messages}`. The terms are checked as a save checks them and the
    environment and policy as a dry run checks them; every problem is raised at once as
    RecipeRejected (a 400 naming the field), and a refused request writes nothing."""

    request = _request(data)
    play = request.play
    if play is None:
        raise RecipeRejected({"play": ["Field required"]})
    errors: dict[str, list[str]] = {}
    terms: list[RewardTerm] = []
    try:
        terms = recipe_parse({"name": DRAFT_NAME, "terms": request.terms}).terms
    except RecipeRejected as exc:
        errors.update(exc.errors)
    # (recipe_parse refuses a NUL anywhere in the terms: the job keeps them as JSON.)
    shared: dict[str, Any] = {"environment": play.environment, "models": [play.policy], "episodes": 1, "seed": play.seed}
    if play.prompt is not None:
        shared["prompt"] = play.prompt
    try:
        evaluation = parse_evaluation_request(shared)
    except RunConfigError as exc:  # the shape was checked above: only a rule of theirs
        raise RecipeRejected({f"play.{k}": v for k, v in exc.errors.items()}) from None
    environment, key, entries, found = evaluation_check(request=evaluation, user=user)
    for field, messages in found.items():
        # "models.0": "has no solver" / "lists no typed tools" for this policy.
        errors.setdefault("play.policy" if field.startswith("models") else f"play.{field}", []).extend(messages)
    if errors or environment is None:
        raise RecipeRejected(errors)
    params = {
        "terms": terms_dump(terms),
        "environment": environment.pk,
        "environment_name": environment.name,
        "environment_key": key,
        "name": job_env_name(play.name, environment),
        "prompt": play.prompt if play.prompt is not None else DEFAULT_PROMPTS[key],
        "policy": entries[0],
        "seed": play.seed,
    }
    return job_create(owner=user, kind=PREVIEW_KIND, params=params, total=1)
