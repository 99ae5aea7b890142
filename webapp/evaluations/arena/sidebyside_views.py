"""Pages of the arena: the form that picks 2-4 models or checkpoints and an episode seed
(`/arena/`), and the side by side of their episodes on that seed (`/arena/side-by-side/`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods

from webapp.catalog.selectors import environments_visible_to
from webapp.core.throttles import throttle_posts
from webapp.core.users import signed_in_user
from webapp.evaluations.arena.replay import FALLBACK_RENDERER, TurnError, parse_turn, renderer_for
from webapp.evaluations.arena.sidebyside import (
    MAX_COLUMNS,
    SideBySideError,
    SideBySideNotFound,
    arena_model_choices,
    arena_prepare,
    parse_refs,
    side_by_side,
    side_by_side_url,
)
from webapp.evaluations.forms import errors_as_lines, int_field, model_line
from webapp.runs.config import RunConfigError

FORM_FIELDS = ("environment", "seed", "prompt", "max_completion_length", "max_tool_calling_iterations")
MAX_FIELD_CHARS = 4000


def _error_page(request: HttpRequest, error: str, status: int) -> HttpResponse:
    return render(
        request, "evaluations/side_by_side_error.html", {"nav": "arena", "error": error}, status=status
    )


def _posted_models(request: HttpRequest) -> list[str]:
    """Each slot: the free text when given, else the picked choice; empty slots are skipped."""
    lines = []
    for slot in range(MAX_COLUMNS):
        text = request.POST.get(f"model_text_{slot}", "").strip()[:MAX_FIELD_CHARS]
        picked = request.POST.get(f"model_{slot}", "").strip()[:MAX_FIELD_CHARS]
        if text or picked:
            lines.append(text or picked)
    return lines


@login_required
@throttle_posts("launch")
@require_http_methods(["GET", "POST"])
def arena(request: HttpRequest) -> HttpResponse:
    errors: list[str] = []
    posted: dict[str, Any] = {}
    if request.method == "POST":
        posted = {k: request.POST.get(k, "")[:MAX_FIELD_CHARS] for k in FORM_FIELDS}
        models = _posted_models(request)
        posted["models"] = models
        data: dict[str, Any] = {
            "environment": int_field(posted["environment"], 0),
            "models": [model_line(line) for line in models],
            "seed": int_field(posted["seed"], 0),
        }
        for name in ("max_completion_length", "max_tool_calling_iterations"):
            if posted[name].strip():
                data[name] = int_field(posted[name], 0)
        if posted["prompt"].strip():
            data["prompt"] = posted["prompt"]
        try:
            refs, _evaluation = arena_prepare(user=signed_in_user(request), data=data)
        except RunConfigError as exc:
            errors = errors_as_lines(exc)
        else:
            return redirect(side_by_side_url(refs))
    choices = arena_model_choices(user=request.user)
    values = {value for value, _shown in choices}
    lines = posted.get("models") or []
    slots = []
    for slot in range(MAX_COLUMNS):
        line = lines[slot] if slot < len(lines) else ""
        slots.append(
            {"index": slot, "picked": line if line in values else "", "text": "" if line in values else line}
        )
    return render(
        request,
        "evaluations/arena.html",
        {
            "nav": "arena",
            "environments": environments_visible_to(user=request.user),
            "choices": choices,
            "slots": slots,
            "errors": errors,
            "posted": posted,
        },
        status=400 if errors else 200,
    )


@login_required
def side_by_side_view(request: HttpRequest) -> HttpResponse:
    query = request.GET
    try:
        refs = parse_refs(
            user=request.user,
            episodes=query.getlist("episode"),
            evaluation=query.get("evaluation"),
            index=query.get("index"),
            models=query.getlist("model"),
        )
        shown = side_by_side(user=request.user, refs=refs)
        turns = max((c["replay"]["turns"] for c in shown.columns if c["replay"]), default=0)
        turn = parse_turn(query.get("turn"), turns=turns)
    except SideBySideNotFound as exc:
        return _error_page(request, str(exc), 404)
    except (SideBySideError, TurnError) as exc:
        return _error_page(request, str(exc), 400)
    renderers = {c["replay"]["renderer"] for c in shown.columns if c["replay"]}
    renderer = next(iter(renderers), FALLBACK_RENDERER) if len(renderers) == 1 else FALLBACK_RENDERER
    renderer = renderer_for(renderer) if renderer != FALLBACK_RENDERER else renderer
    scripts = ["js/replay/registry.js", "js/replay/transcript.js"]
    if renderer != FALLBACK_RENDERER:
        scripts.append(f"js/replay/{renderer}.js")
    scripts += ["js/replay/episode.js", "js/replay/controls.js", "js/replay/sidebyside.js"]
    page = {
        "columns": shown.columns,
        "pending": shown.pending,
        "turn": turn,
        "path": request.path,
        "query": urlencode([("episode", r.text) for r in refs]),
    }
    return render(
        request,
        "evaluations/side_by_side.html",
        {
            "nav": "arena",
            "shown": shown,
            "page": page,
            "turn": turn,
            "turns": turns,
            "scripts": scripts,
            "progress": {
                "done": sum(p["done"] for p in shown.pending),
                "total": sum(p["total"] for p in shown.pending),
            },
        },
    )
