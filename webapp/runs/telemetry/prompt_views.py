"""Pages of the prompt-pinned timeline: a run's training prompts (most repeated first), and
one prompt's GRPO groups at chosen steps, one column a step (webapp/runs/telemetry/prompts.py).

Server-rendered with Django's auto-escaping: model and environment text is never HTML.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode

from webapp.runs.models import Rollout, Run
from webapp.runs.selectors import run_for
from webapp.runs.telemetry.prompts import (
    DEFAULT_PROMPT_ORDER,
    MAX_CHOSEN_STEPS,
    PROMPT_ORDERS,
    PromptStepsError,
    prompt_steps_parse,
    run_prompt_timeline,
    run_prompts,
)
from webapp.runs.telemetry.transcripts import transcript_messages

PAGE_PROMPTS = 50
MAX_PAGE = 100_000
ORDER_LABELS = {"most_steps": "most steps first", "fewest_steps": "fewest steps first", "first_step": "first trained first"}


def _number(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) and not isinstance(value, bool) else "—"


def _prompt_preview(prompt: Any) -> str:
    """The prompt's last user message (or its last message), for the list."""
    messages = transcript_messages(prompt)
    users = [m for m in messages if m["role"] == "user"] or messages
    return users[-1]["content"] if users else ""


def _rollout(run: Run, rollout: Rollout) -> dict[str, Any]:
    rewards = rollout.rewards if isinstance(rollout.rewards, dict) else {}
    messages = transcript_messages(rollout.messages)
    return {
        "seq": rollout.seq,
        "reward": _number(rollout.reward),
        "advantage": _number(rollout.advantage),
        "unscored": rollout.unscored,
        "rewards": [(str(term), _number(value)) for term, value in rewards.items()],
        "messages": messages,
        "tool_calls": sum(len(m["tool_calls"]) for m in messages),
        "replay_url": reverse("rollout-replay", args=[run.pk, rollout.seq]),
    }


@login_required
def run_prompt_list(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_for(user=request.user, pk=pk)
    order = request.GET.get("order") or DEFAULT_PROMPT_ORDER
    raw_page = request.GET.get("page") or "1"
    if order not in PROMPT_ORDERS:
        return _bad_request(request, run, f"order must be one of {', '.join(PROMPT_ORDERS)}")
    if not (raw_page.isascii() and raw_page.isdigit() and len(raw_page) <= 6 and 1 <= int(raw_page) <= MAX_PAGE):
        return _bad_request(request, run, f"page must be a whole number from 1 to {MAX_PAGE}")
    page = int(raw_page)
    found = run_prompts(run=run, order=order, offset=(page - 1) * PAGE_PROMPTS, limit=PAGE_PROMPTS)
    rows = [
        {**row, "preview": _prompt_preview(row["prompt"]), "reward_mean": _number(row["reward_mean"]),
         "url": reverse("run-prompt-timeline", args=[run.pk, row["prompt_key"]])}
        for row in found.results
    ]
    here = reverse("run-prompts", args=[run.pk])

    def page_url(number: int) -> str:
        query: dict[str, str | int] = {"order": order, "page": number}
        return f"{here}?{urlencode(query)}"

    previous_url = page_url(page - 1) if page > 1 else ""
    next_url = page_url(page + 1) if page * PAGE_PROMPTS < found.count else ""
    return render(
        request,
        "runs/prompts.html",
        {
            "nav": "runs",
            "run": run,
            "prompts": rows,
            "count": found.count,
            "untracked": found.untracked,
            "order": order,
            "orders": [(key, ORDER_LABELS[key]) for key in PROMPT_ORDERS],
            "page": page,
            "previous_url": previous_url,
            "next_url": next_url,
        },
    )


def _bad_request(request: HttpRequest, run: Run, error: str) -> HttpResponse:
    return render(
        request, "runs/prompt_error.html", {"nav": "runs", "run": run, "error": error}, status=400
    )


@login_required
def run_prompt_timeline_view(request: HttpRequest, pk: int, key: str) -> HttpResponse:
    run = run_for(user=request.user, pk=pk)
    raw_steps = request.GET.get("steps")
    try:
        steps = prompt_steps_parse(raw_steps)
    except PromptStepsError as exc:
        return _bad_request(request, run, str(exc))
    timeline = run_prompt_timeline(run=run, key=key, steps=steps)
    if timeline is None:
        raise Http404("this run has no rollouts of that prompt")
    columns = [
        {
            "step": column["step"],
            "rollout_count": column["rollout_count"],
            "shown": len(column["rollouts"]),
            "reward_mean": _number(column["reward_mean"]),
            "reward_std": _number(column["reward_std"]),
            "rollouts": [_rollout(run, r) for r in column["rollouts"]],
        }
        for column in timeline["steps"]
    ]
    trained = timeline["trained_steps"]
    return render(
        request,
        "runs/prompt_timeline.html",
        {
            "nav": "runs",
            "run": run,
            "timeline": timeline,
            "prompt": transcript_messages(timeline["prompt"]),
            "columns": columns,
            "steps_value": ",".join(str(s) for s in steps) if steps is not None else "",
            "default_value": ",".join(str(s) for s in timeline["default_steps"]),
            "trained_text": ", ".join(str(s) for s in trained),
            "trained_thinned": len(trained) < timeline["trained_step_count"],
            "max_chosen": MAX_CHOSEN_STEPS,
        },
    )
