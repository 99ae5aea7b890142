"""Side by side (the arena): 2-4 stored evaluation episodes of one environment on the same
episode seed, played back in synchronised columns (webapp/static/js/replay/sidebyside.js).

A column is named by `<evaluation id>:<model index>:<episode index>`, so a page's URL stays
the same while an episode is still being played: a column whose evaluation is active shows
as pending, and the page polls that evaluation until it is stored. The arena form
(`arena_prepare`) reuses stored episodes of the same (environment, prompt, model, episode seed,
generation settings) and plays only the missing ones, in one evaluation of that seed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.urls import reverse

from webapp.evaluations.arena.replay import evaluation_replay
from webapp.evaluations.config import DEFAULT_PROMPTS, parse_evaluation_request
from webapp.evaluations.models import Evaluation, EvaluationEpisode
from webapp.evaluations.selectors import evaluations_visible_to
from webapp.evaluations.services import evaluation_check, evaluation_create
from webapp.runs.checkpoints import run_checkpoints
from webapp.runs.config import RunConfigError
from webapp.runs.selectors import runs_visible_to

MIN_COLUMNS = 2
MAX_COLUMNS = 4
_REF = re.compile(r"^([0-9]{1,12}):([0-9]{1,6}):([0-9]{1,6})$")


class SideBySideError(ValueError):
    """A request the page cannot show (400); the message says what to fix."""


class SideBySideNotFound(LookupError):
    """A column names an evaluation, model or episode the user cannot see (404)."""


@dataclass(frozen=True)
class ColumnRef:
    evaluation: int
    model_index: int
    index: int

    @property
    def text(self) -> str:
        return f"{self.evaluation}:{self.model_index}:{self.index}"


@dataclass
class SideBySide:
    columns: list[dict[str, Any]]
    seed: int | None
    environment: str
    # Evaluations still playing a column: [{"id", "api", "done", "total", "status"}].
    pending: list[dict[str, Any]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def parse_refs(
    *,
    user: User | AnonymousUser,
    episodes: list[str],
    evaluation: str | None,
    index: str | None,
    models: list[str],
) -> list[ColumnRef]:
    """The columns a query names: `episode=<evaluation>:<model index>:<index>` (repeated), or
    `evaluation=<id>&index=<i>` with `model=<model index>` repeated (all its models when none)."""
    refs: list[ColumnRef] = []
    if len(episodes) > MAX_COLUMNS or len(models) > MAX_COLUMNS:
        count = max(len(episodes), len(models))
        raise SideBySideError(f"side by side shows {MIN_COLUMNS} to {MAX_COLUMNS} episodes; {count} given")
    if episodes:
        if evaluation or index or models:
            raise SideBySideError("give either episode=... columns or evaluation=, index= and model=")
        for raw in episodes:
            match = _REF.fullmatch(raw.strip())
            if match is None:
                raise SideBySideError(
                    f"episode must be <evaluation id>:<model index>:<episode index>, got {raw[:40]!r}"
                )
            refs.append(ColumnRef(*(int(g) for g in match.groups())))
    elif evaluation:
        numbers = [evaluation, index or "0", *models]
        for raw in numbers:
            if not (raw.isascii() and raw.isdigit() and len(raw) <= 12):
                raise SideBySideError(f"evaluation, index and model are whole numbers, got {raw[:40]!r}")
        refs = [ColumnRef(int(evaluation), int(m), int(index or "0")) for m in models]
        if not models:
            found = (
                evaluations_visible_to(user=user)
                .filter(pk=int(evaluation))
                .values_list("model_specs", flat=True)
                .first()
            )
            if found is None:
                raise SideBySideNotFound(f"no evaluation with id {int(evaluation)}")
            count = len(found) if isinstance(found, list) else 0
            refs = [ColumnRef(int(evaluation), m, int(index or "0")) for m in range(count)]
    else:
        raise SideBySideError("name the columns: evaluation=<id>&index=<i>&model=<m>..., or episode=...")
    if not MIN_COLUMNS <= len(refs) <= MAX_COLUMNS:
        raise SideBySideError(
            f"side by side shows {MIN_COLUMNS} to {MAX_COLUMNS} episodes; {len(refs)} given"
        )
    if len(set(refs)) != len(refs):
        raise SideBySideError("the same episode is named twice")
    return refs


def _known_seed(evaluation: Evaluation, index: int) -> int | None:
    seeds = evaluation.episode_seeds or []
    return int(seeds[index]) if index < len(seeds) else None


def side_by_side(*, user: User | AnonymousUser, refs: list[ColumnRef]) -> SideBySide:
    """The columns' replays (as the replay page embeds them) and a summary each; raises
    SideBySideNotFound for what the user cannot see, SideBySideError for columns that are
    not the same episode (another environment or another seed)."""
    visible = {
        e.pk: e
        for e in evaluations_visible_to(user=user).filter(pk__in={r.evaluation for r in refs})
    }
    stored = {
        (e.evaluation_id, e.model_index, e.index): e
        for e in EvaluationEpisode.objects.filter(evaluation_id__in=list(visible)).filter(
            model_index__in={r.model_index for r in refs}, index__in={r.index for r in refs}
        )
    }
    columns: list[dict[str, Any]] = []
    seeds: dict[int, str] = {}
    environments: dict[int | None, str] = {}
    pending: dict[int, dict[str, Any]] = {}
    failed: list[str] = []
    for number, ref in enumerate(refs):
        evaluation = visible.get(ref.evaluation)
        # The same answer for an evaluation that exists but is not the user's.
        if evaluation is None:
            raise SideBySideNotFound(f"no evaluation with id {ref.evaluation}")
        if not (ref.model_index < len(evaluation.model_specs) and ref.index < evaluation.episodes):
            raise SideBySideNotFound(
                f"evaluation {evaluation.pk} has {len(evaluation.model_specs)} model(s) and "
                f"{evaluation.episodes} episode(s) each; no {ref.text}"
            )
        environments.setdefault(evaluation.environment_id, evaluation.environment_name)
        entry = evaluation.model_specs[ref.model_index]
        episode = stored.get((ref.evaluation, ref.model_index, ref.index))
        seed = episode.seed if episode is not None else _known_seed(evaluation, ref.index)
        if seed is not None:
            seeds.setdefault(int(seed), ref.text)
        column: dict[str, Any] = {
            "column": number,
            "ref": ref.text,
            "label": str(entry.get("label", "")),
            "title": str(entry.get("title", entry.get("label", ""))),
            "seed": seed,
            "replay": None,
            "summary": None,
            "state": "stored",
        }
        if episode is not None:
            replay = evaluation_replay(evaluation=evaluation, episode=episode)
            column["replay"] = replay
            column["replay_url"] = reverse(
                "evaluation-episode-replay", args=[evaluation.pk, ref.model_index, ref.index]
            )
            column["summary"] = {
                "won": bool(episode.won),
                "steps": replay["turns"],
                "reward": replay["reward"],
                "tool_failures": int(episode.tool_failures),
            }
        elif evaluation.is_active:
            column["state"] = "pending"
            pending[evaluation.pk] = {
                "id": evaluation.pk,
                "api": reverse("api-evaluation", args=[evaluation.pk]),
                "done": evaluation.done,
                "total": evaluation.total,
                "status": evaluation.status,
            }
        else:
            column["state"] = "missing"
            failed.append(
                f"{column['label']}: evaluation #{evaluation.pk} is {evaluation.status} without "
                f"this episode{': ' + evaluation.error[:300] if evaluation.error else ''}"
            )
        columns.append(column)
    if len(environments) > 1:
        raise SideBySideError(
            "the columns are episodes of different environments: "
            + ", ".join(sorted({str(name) for name in environments.values()}))
        )
    if len(seeds) > 1:
        raise SideBySideError(
            "the columns are not the same episode: seeds "
            + ", ".join(f"{seed} ({ref})" for seed, ref in seeds.items())
        )
    return SideBySide(
        columns=columns,
        seed=next(iter(seeds), None),
        environment=next(iter(environments.values()), ""),
        pending=list(pending.values()),
        failed=failed,
    )


def side_by_side_url(refs: list[ColumnRef]) -> str:
    from django.utils.http import urlencode

    return f"{reverse('arena-side-by-side')}?{urlencode([('episode', r.text) for r in refs])}"


# --- the arena form -------------------------------------------------------------------


def arena_model_choices(*, user: User | AnonymousUser) -> list[tuple[str, str]]:
    """What the form offers: (the model line the form posts, how it is shown). Checkpoints of
    the user's runs (`run:<id>@<step>`), the demo models built here, and the reference policies."""
    choices: list[tuple[str, str]] = [("solver", "solver (reference policy)"), ("random", "random (reference policy)")]
    models_dir = Path(settings.MODELS_DIR)
    try:
        demos = sorted(p.name for p in models_dir.iterdir() if (p / "config.json").is_file())
    except OSError:
        demos = []
    choices += [(f"demo:{name}", f"demo:{name}") for name in demos if re.fullmatch(r"[a-z0-9-]+", name)]
    for run in runs_visible_to(user=user).order_by("-id")[:50]:
        for checkpoint in run_checkpoints(run=run):
            phase = " (warm-up)" if checkpoint.phase == "warmup" else ""
            choices.append(
                (f"run:{run.pk}@{checkpoint.step}", f"run #{run.pk} {run.name} · step {checkpoint.step}{phase}")
            )
    return choices


def _decoding(request: Any) -> dict[str, Any]:
    """What evaluation_create stores in Evaluation.settings for `request` (the generation
    limits, and the reset arguments when any): episodes are reused only under equal settings."""
    reset = getattr(request, "reset", None)
    return {
        "max_completion_length": request.max_completion_length,
        "max_tool_calling_iterations": request.max_tool_calling_iterations,
        "chat_template_kwargs": request.chat_template_kwargs,
        **({"reset": reset} if reset else {}),
    }


def _stored_episode(
    *, user: User, environment_id: int, prompt: str, label: str, seed: int,
    decoding: dict[str, Any],
) -> tuple[int, int, int] | None:
    """The newest stored episode of `label` on `seed` under the same prompt and generation
    settings. A `{phrase}` prompt's text is drawn from the row's rng, which differs between
    an evaluation of given seeds and one whose seeds are drawn: only the former then count."""
    candidates = (
        EvaluationEpisode.objects.filter(
            evaluation__in=evaluations_visible_to(user=user),
            evaluation__environment_id=environment_id,
            evaluation__prompt=prompt,
            model=label,
            seed=seed,
            lost=False,
        )
        .select_related("evaluation")
        .order_by("-id")[:50]
    )
    for episode in candidates:
        evaluation = episode.evaluation
        if "{phrase}" in prompt and not evaluation.episode_seeds:
            continue
        entry = evaluation.model_specs[episode.model_index] if episode.model_index < len(evaluation.model_specs) else {}
        if entry.get("label") != label or (evaluation.settings or {}) != decoding:
            continue
        return evaluation.pk, episode.model_index, episode.index
    return None


def arena_prepare(*, user: User, data: dict[str, Any]) -> tuple[list[ColumnRef], Evaluation | None]:
    """Validate an arena request ({environment, models (2-4), seed: the episode seed, and the
    evaluation's generation settings}), find each model's stored episode on that seed and queue
    one evaluation (greedy, that seed only) of the models that have none. Returns the columns
    in the order given and the queued evaluation, if any. A rejected request writes nothing."""
    models = data.get("models")
    if not isinstance(models, list) or not MIN_COLUMNS <= len(models) <= MAX_COLUMNS:
        count = len(models) if isinstance(models, list) else 0
        raise RunConfigError(
            {"models": [f"pick {MIN_COLUMNS} to {MAX_COLUMNS} models or checkpoints; {count} given"]}
        )
    seed = data.get("seed")
    request_data = {k: v for k, v in data.items() if k != "seed"}
    request_data["episode_seeds"] = [seed]
    try:
        request = parse_evaluation_request(request_data)
    except RunConfigError as exc:
        # The episode seed travels as the request's one episode seed: report it as `seed`.
        raise RunConfigError(
            {("seed" if k.startswith("episode_seeds") else k): v for k, v in exc.errors.items()}
        ) from None
    environment, key, entries, errors = evaluation_check(request=request, user=user)
    if errors or environment is None:
        raise RunConfigError(errors)
    assert request.episode_seeds is not None
    episode_seed = request.episode_seeds[0]
    prompt = request.prompt if request.prompt is not None else DEFAULT_PROMPTS[key]
    decoding = _decoding(request)
    found: list[tuple[int, int, int] | None] = [
        _stored_episode(
            user=user, environment_id=environment.pk, prompt=prompt, label=str(entry["label"]),
            seed=episode_seed, decoding=decoding,
        )
        for entry in entries
    ]
    missing = [i for i, ref in enumerate(found) if ref is None]
    evaluation = None
    if missing:
        evaluation = evaluation_create(
            owner=user,
            data={**request_data, "models": [models[i] for i in missing], "prompt": prompt},
        )
    refs: list[ColumnRef] = []
    played = 0
    for ref in found:
        if ref is None:
            assert evaluation is not None
            refs.append(ColumnRef(evaluation.pk, played, 0))
            played += 1
        else:
            refs.append(ColumnRef(*ref))
    return refs, evaluation
