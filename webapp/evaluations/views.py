"""Pages: the evaluations list with the form to start one, and one evaluation's page."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST

from webapp.catalog.selectors import environments_visible_to
from webapp.core.plotly import plotly_url
from webapp.core.throttles import throttle_posts
from webapp.core.users import signed_in_user
from webapp.evaluations.apis import results_csv, visible_evaluation
from webapp.evaluations.arena.replay import evaluation_replay, replay_page
from webapp.evaluations.arena.sidebyside import MAX_COLUMNS, MIN_COLUMNS
from webapp.evaluations.config import MAX_EPISODES
from webapp.evaluations.forms import errors_as_lines, int_field, model_line
from webapp.evaluations.models import EvaluationEpisode
from webapp.evaluations.selectors import (
    checkpoint_figure,
    evaluation_can_change,
    evaluation_checkpoint_series,
    evaluation_columns,
    evaluation_episodes,
    evaluation_progress,
    evaluation_results,
    evaluations_visible_to,
)
from webapp.evaluations.services import (
    evaluation_create,
    evaluation_create_for_checkpoints,
)
from webapp.runs.config import RunConfigError
from webapp.runs.selectors import run_for

# "run:<id>@<step|last>" on a line of the form: the notation Run.model shows a checkpoint in.
EPISODES_PER_PAGE = 10


def _cell(value: Any) -> dict[str, str]:
    """A table cell: the exact value to sort by, and a short one to read."""
    if value is None:
        return {"raw": "", "shown": "—"}
    if isinstance(value, float):
        return {"raw": repr(value), "shown": f"{value:.4g}"}
    return {"raw": str(value), "shown": str(value)}


@login_required
@throttle_posts("launch")
@require_http_methods(["GET", "POST"])
def evaluation_list(request: HttpRequest) -> HttpResponse:
    errors: list[str] = []
    posted: dict[str, str] = {}
    if request.method == "POST":
        posted = {
            k: request.POST.get(k, "")[:20_000]
            for k in ("environment", "models", "episodes", "seed", "prompt")
        }
        data: dict[str, Any] = {
            "environment": int_field(posted["environment"], 0),
            "models": [
                model_line(line.strip()) for line in posted["models"].splitlines() if line.strip()
            ],
            "episodes": int_field(posted["episodes"], 10),
            "seed": int_field(posted["seed"], 0),
        }
        if posted["prompt"].strip():
            data["prompt"] = posted["prompt"]
        try:
            evaluation = evaluation_create(owner=signed_in_user(request), data=data)
        except RunConfigError as exc:
            errors = errors_as_lines(exc)
        else:
            messages.success(request, f"Evaluation #{evaluation.pk} queued.")
            return redirect("evaluation-detail", pk=evaluation.pk)
    evaluations = list(evaluations_visible_to(user=request.user)[:200])
    return render(
        request,
        "evaluations/evaluation_list.html",
        {
            "nav": "evaluations",
            "evaluations": evaluations,
            "environments": environments_visible_to(user=request.user),
            "errors": errors,
            "posted": posted,
            "max_episodes": MAX_EPISODES,
        },
        status=400 if errors else 200,
    )


@login_required
def evaluation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = visible_evaluation(request, pk)
    columns = evaluation_columns(key=evaluation.environment_key)
    results = evaluation_results(evaluation=evaluation)
    series = evaluation_checkpoint_series(evaluation=evaluation)
    paginator = Paginator(evaluation_episodes(evaluation=evaluation), EPISODES_PER_PAGE)
    page = paginator.get_page(request.GET.get("page"))

    return render(
        request,
        "evaluations/evaluation_detail.html",
        {
            "nav": "evaluations",
            "evaluation": evaluation,
            "progress": evaluation_progress(evaluation=evaluation),
            "columns": columns,
            "rows": [[_cell(row.get(c)) for c in columns] for row in results],
            "page": page,
            "episodes_data": [
                {
                    "model": e.model,
                    "index": e.index,
                    "seed": e.seed,
                    "reward": e.reward,
                    "won": e.won,
                    "tool_failures": e.tool_failures,
                    "messages": e.messages,
                    "replay_url": reverse(
                        "evaluation-episode-replay", args=[evaluation.pk, e.model_index, e.index]
                    ),
                }
                for e in page.object_list
            ],
            "figure": checkpoint_figure(series) if series and series["steps"] else None,
            "best": {**series["best"], "shown": _cell(series["best"]["mean_reward"])["shown"]}
            if series and series["best"]
            else None,
            "side_by_side": _side_by_side_links(evaluation),
            "can_change": evaluation_can_change(user=request.user, evaluation=evaluation),
            "api_url": reverse("api-evaluation", args=[evaluation.pk]),
            "plotly_url": plotly_url(),
        },
    )


SIDE_BY_SIDE_LINKS = 50


def _side_by_side_links(evaluation: Any) -> list[dict[str, Any]]:
    """Per episode index, the side by side of its models (the first four when more)."""

    count = len(evaluation.model_specs)
    if count < MIN_COLUMNS:
        return []
    models = [("model", str(m)) for m in range(min(count, MAX_COLUMNS))]
    base = reverse("arena-side-by-side")
    return [
        {
            "index": index,
            "url": f"{base}?{urlencode([('evaluation', evaluation.pk), ('index', index), *models])}",
        }
        for index in range(min(evaluation.episodes, SIDE_BY_SIDE_LINKS))
    ]


@login_required
def evaluation_csv(request: HttpRequest, pk: int) -> HttpResponse:
    return results_csv(visible_evaluation(request, pk))


@login_required
def evaluation_episode_replay(
    request: HttpRequest, pk: int, model_index: int, index: int
) -> HttpResponse:
    evaluation = visible_evaluation(request, pk)
    episode = get_object_or_404(
        EvaluationEpisode, evaluation=evaluation, model_index=model_index, index=index
    )
    return replay_page(request, evaluation_replay(evaluation=evaluation, episode=episode))


@login_required
@throttle_posts("launch")
@require_POST
def run_evaluate_checkpoints(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_for(user=request.user, pk=pk)
    try:
        evaluation = evaluation_create_for_checkpoints(
            owner=signed_in_user(request),
            run=run,
            episodes=_checked_int(request.POST.get("episodes", ""), 10, 1, MAX_EPISODES),
            seed=_checked_int(request.POST.get("seed", ""), 0, 0, 2**31 - 1),
        )
    except RunConfigError as exc:
        for line in errors_as_lines(exc):
            messages.error(request, line)
        return redirect("run-detail", pk=run.pk)
    messages.success(request, f"Evaluation #{evaluation.pk} of run {run.pk}'s checkpoints queued.")
    return redirect("evaluation-detail", pk=evaluation.pk)


def _checked_int(raw: str, default: int, lo: int, hi: int) -> int:
    value = int_field(raw, default)
    if not isinstance(value, int) or not lo <= value <= hi:
        raise RunConfigError(
            {"episodes/seed": [f"'{str(raw)[:20]}' is not a whole number from {lo} to {hi}"]}
        )
    return value
