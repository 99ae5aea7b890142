"""The replay viewer: one stored episode (a training rollout or an evaluation episode) played
back turn by turn in the browser (webapp/static/js/replay/).

The page embeds the stored episode as JSON (`json_script`) and the JavaScript draws it; the
episode is never re-run. The renderer is the one the environment's lab spec names
(`webapp/static/js/replay/<renderer>.js`), else the plain transcript.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.contrib.staticfiles import finders
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from envs.registry import recorded_adapter, renderer_name
from webapp.catalog.models import Environment
from webapp.runs.models import Rollout, Run
from webapp.runs.selectors import rollout_replay_url, run_for

if TYPE_CHECKING:
    from webapp.evaluations.models import Evaluation, EvaluationEpisode

FALLBACK_RENDERER = "transcript"
# A turn number wider than this is not a turn of any stored episode: refused, not parsed.
MAX_TURN_DIGITS = 6


class TurnError(ValueError):
    pass


@lru_cache(maxsize=64)
def renderer_for(key: str) -> str:
    """The renderer module for an environment key: the one its lab spec names, when that is a
    plain name with a file (so a spec can never point a script tag elsewhere)."""
    name = renderer_name(key) or ""
    if name and name.isascii() and name.isalnum() and name != FALLBACK_RENDERER:
        if finders.find(f"js/replay/{name}.js"):
            return name
    return FALLBACK_RENDERER


def _number(value: Any) -> float | None:
    """A JSON-safe number: json_script would write NaN/Infinity, which JSON.parse refuses."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _message_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


def _assistant_turns(messages: list[Any]) -> int:
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def parse_turn(raw: str | None, *, turns: int) -> int:
    """`?turn=N`: absent is the start (0); past the last turn is the last turn."""
    if raw is None or raw == "":
        return 0
    if not (raw.isascii() and raw.isdigit() and len(raw) <= MAX_TURN_DIGITS):
        raise TurnError(f"turn must be a whole number from 0 to {turns}, got {raw[:20]!r}")
    return min(int(raw), turns)


def run_environment_key(*, run: Run, env_name: str) -> str:
    """The bundled key (wordle, catch, ...) of the run's environment named `env_name`, or ""
    when the run's config does not name it or registration chose no bundled adapter."""
    items = (run.config or {}).get("environments") or []
    chosen = [i for i in items if isinstance(i, dict) and i.get("name") == env_name]
    if not chosen and len(items) == 1 and isinstance(items[0], dict) and not env_name:
        chosen = items
    if not chosen or not isinstance(chosen[0].get("environment"), int):
        return ""
    environment = Environment.objects.filter(pk=chosen[0]["environment"]).first()
    spec = recorded_adapter(environment.metadata) if environment is not None else None
    return spec.key if spec is not None else ""


def rollout_replay(*, run: Run, rollout: Rollout) -> dict[str, Any]:
    rewards = rollout.rewards if isinstance(rollout.rewards, dict) else {}
    messages = _message_list(rollout.messages)
    key = run_environment_key(run=run, env_name=rollout.env)
    return {
        "source": "rollout",
        "title": f"Run #{run.pk} · rollout #{rollout.seq} · step {rollout.step}",
        "environment": rollout.env,
        "key": key,
        "renderer": renderer_for(key),
        "prompt": _message_list(rollout.prompt),
        "messages": messages,
        "turns": _assistant_turns(messages),
        "reward": _number(rollout.reward),
        "advantage": _number(rollout.advantage),
        "rewards": {str(term): _number(value) for term, value in rewards.items()},
        "unscored": rollout.unscored,
        "won": None,
        "seed": None,
        "step": rollout.step,
        "back_url": f"{reverse('run-detail', args=[run.pk])}#rollout-{rollout.seq}",
        "back_label": f"run #{run.pk}",
    }


def evaluation_replay(*, evaluation: Evaluation, episode: EvaluationEpisode) -> dict[str, Any]:
    """An evaluation episode: its messages hold the prompt too; the turns start at the
    first assistant (or tool) message."""
    everything = _message_list(episode.messages)
    first = next(
        (
            i
            for i, m in enumerate(everything)
            if isinstance(m, dict) and m.get("role") in ("assistant", "tool")
        ),
        len(everything),
    )
    messages = everything[first:]
    key = evaluation.environment_key or ""
    return {
        "source": "evaluation",
        "title": (
            f"Evaluation #{evaluation.pk} · {episode.model} · episode {episode.index} "
            f"· seed {episode.seed}"
        ),
        "environment": evaluation.environment_name,
        "key": key,
        "renderer": renderer_for(key),
        "prompt": everything[:first],
        "messages": messages,
        "turns": _assistant_turns(messages),
        "reward": _number(episode.reward),
        "advantage": None,
        "rewards": {},
        "unscored": bool(episode.lost),
        "won": bool(episode.won),
        "seed": episode.seed,
        "step": None,
        "back_url": f"{reverse('evaluation-detail', args=[evaluation.pk])}#episodes",
        "back_label": f"evaluation #{evaluation.pk}",
    }


def replay_page(request: HttpRequest, replay: dict[str, Any]) -> HttpResponse:
    try:
        turn = parse_turn(request.GET.get("turn"), turns=replay["turns"])
    except TurnError as exc:
        return render(request, "replay/replay_error.html", {"error": str(exc)}, status=400)
    replay = {**replay, "turn": turn, "path": request.path}
    scripts = ["js/replay/registry.js", "js/replay/transcript.js"]
    if replay["renderer"] != FALLBACK_RENDERER:
        scripts.append(f"js/replay/{replay['renderer']}.js")
    scripts += ["js/replay/episode.js", "js/replay/controls.js", "js/replay/player.js"]
    return render(
        request,
        "replay/replay.html",
        {"nav": "replay", "replay": replay, "scripts": scripts},
    )


def _visible_rollout(request: HttpRequest, pk: int, seq: int) -> tuple[Run, Rollout]:
    run = run_for(user=request.user, pk=pk)
    return run, get_object_or_404(Rollout, run=run, seq=seq)


@login_required
def rollout_replay_view(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    run, rollout = _visible_rollout(request, pk, seq)
    return replay_page(request, rollout_replay(run=run, rollout=rollout))


@login_required
def rollout_replay_redirect(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    """`/runs/<id>/rollouts/<seq>/replay/`, the path next to the run's own pages, answers a
    permanent redirect to the replay page. Access is checked here too: a redirect for a run
    the caller may not see would tell them it exists."""
    _run, rollout = _visible_rollout(request, pk, seq)
    target = rollout_replay_url(rollout)
    query = request.GET.urlencode()
    return HttpResponsePermanentRedirect(f"{target}?{query}" if query else target)
