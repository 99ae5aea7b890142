"""REST API of the prompt-pinned timeline (webapp/runs/telemetry/prompts.py): thin views.

`GET /api/runs/<id>/prompts/?order=&page=&limit=`: the run's training prompts, paginated;
`GET /api/runs/<id>/prompts/<key>/?steps=1,5,9`: one prompt's GRPO groups at those steps
(default: evenly spaced over the steps it was trained at). The run is visible as on
`GET /api/runs/<id>/` (its owner, or runs.view_run); anyone else gets a 404.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.core.params import int_param
from webapp.runs.models import Rollout
from webapp.runs.selectors import rollout_replay_url, run_for
from webapp.runs.telemetry.prompts import (
    DEFAULT_PROMPT_ORDER,
    MAX_CHOSEN_STEPS,
    PROMPT_ORDERS,
    PromptStepsError,
    prompt_steps_parse,
    run_prompt_timeline,
    run_prompts,
)

MAX_PAGE_SIZE = 200


class RunPromptOut(serializers.Serializer):
    prompt_key = serializers.CharField()
    env = serializers.CharField()
    seed = serializers.IntegerField(allow_null=True)
    prompt = serializers.JSONField(help_text="The prompt's messages.")
    steps = serializers.IntegerField(help_text="Distinct steps the prompt was trained at.")
    rollouts = serializers.IntegerField()
    first_step = serializers.IntegerField()
    last_step = serializers.IntegerField()
    reward_mean = serializers.FloatField(allow_null=True, help_text="Mean total reward of its scored rollouts.")


class RunPromptListOut(serializers.Serializer):
    count = serializers.IntegerField(help_text="The run's prompts, over all pages.")
    untracked_rollouts = serializers.IntegerField(
        help_text="Rollouts stored before prompt tracking: they belong to no prompt."
    )
    results = RunPromptOut(many=True)
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)


class PromptTimelineRolloutOut(serializers.Serializer):
    seq = serializers.IntegerField()
    reward = serializers.FloatField(allow_null=True)
    rewards = serializers.DictField(child=serializers.FloatField(allow_null=True))
    advantage = serializers.FloatField(allow_null=True)
    unscored = serializers.BooleanField()
    messages = serializers.JSONField()
    replay_url = serializers.SerializerMethodField(help_text="The rollout's replay page (an absolute path).")

    def get_replay_url(self, rollout: Rollout) -> str:
        return rollout_replay_url(rollout)


class PromptTimelineStepOut(serializers.Serializer):
    step = serializers.IntegerField()
    rollout_count = serializers.IntegerField(help_text="The group's rollouts; `rollouts` lists at most 64.")
    reward_mean = serializers.FloatField(allow_null=True)
    reward_std = serializers.FloatField(allow_null=True, help_text="Sample standard deviation (n - 1).")
    rollouts = PromptTimelineRolloutOut(many=True)


class PromptTimelineOut(serializers.Serializer):
    prompt_key = serializers.CharField()
    env = serializers.CharField()
    seed = serializers.IntegerField(allow_null=True)
    prompt = serializers.JSONField(help_text="The prompt's messages.")
    trained_step_count = serializers.IntegerField()
    trained_steps = serializers.ListField(
        child=serializers.IntegerField(), help_text="The steps it was trained at (at most 1000, evenly thinned)."
    )
    default_steps = serializers.ListField(child=serializers.IntegerField())
    chosen = serializers.BooleanField(help_text="Whether `steps=` chose the columns.")
    steps = PromptTimelineStepOut(many=True)


def _page_url(request: Request, page: int) -> str:
    params = request.query_params.copy()
    params["page"] = str(page)
    return request.build_absolute_uri(f"{request.path}?{params.urlencode()}")


class RunPromptListApi(APIView):
    @extend_schema(
        operation_id="runs_prompts_list",
        parameters=[
            OpenApiParameter("order", str, enum=list(PROMPT_ORDERS), description="Default: most_steps."),
            OpenApiParameter("page", int),
            OpenApiParameter("limit", int),
        ],
        responses=RunPromptListOut,
    )
    def get(self, request: Request, pk: int) -> Response:
        run = run_for(user=request.user, pk=pk)
        order = request.query_params.get("order") or DEFAULT_PROMPT_ORDER
        if order not in PROMPT_ORDERS:
            raise ValidationError({"order": [f"use one of {', '.join(PROMPT_ORDERS)}"]})
        page = int_param(request, "page", 1, 1, 1_000_000) or 1
        limit = int_param(request, "limit", 50, 1, MAX_PAGE_SIZE) or 50
        found = run_prompts(run=run, order=order, offset=(page - 1) * limit, limit=limit)
        body: dict[str, Any] = {
            "count": found.count,
            "untracked_rollouts": found.untracked,
            "results": found.results,
            "next": _page_url(request, page + 1) if page * limit < found.count else None,
            "previous": _page_url(request, page - 1) if page > 1 else None,
        }
        return Response(RunPromptListOut(body).data)


class RunPromptTimelineApi(APIView):
    @extend_schema(
        operation_id="runs_prompt_timeline",
        parameters=[
            OpenApiParameter(
                "steps", str,
                description=f"Comma-separated steps, at most {MAX_CHOSEN_STEPS}; default: evenly spaced.",
            ),
        ],
        responses=PromptTimelineOut,
    )
    def get(self, request: Request, pk: int, key: str) -> Response:
        run = run_for(user=request.user, pk=pk)
        try:
            steps = prompt_steps_parse(request.query_params.get("steps"))
        except PromptStepsError as exc:
            raise ValidationError({"steps": [str(exc)]}) from None
        timeline = run_prompt_timeline(run=run, key=key, steps=steps)
        if timeline is None:
            raise Http404("this run has no rollouts of that prompt")
        return Response(PromptTimelineOut(timeline).data)
