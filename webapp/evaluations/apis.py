"""REST API of evaluations (shared/docs/design.md): thin views over services and selectors."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from webapp.core.export import StreamedExportApi, rows_export_schema, rows_writers
from webapp.core.paging import (
    PAGE_PARAMETERS,
    list_or_page,
    list_or_page_schema,
    page_serializer,
    wants_page,
)
from webapp.core.params import int_param
from webapp.core.throttles import WriteThrottled
from webapp.core.users import signed_in_user
from webapp.evaluations.config import EvaluationRequest
from webapp.evaluations.export import episodes_jsonl, episodes_parquet
from webapp.evaluations.models import Evaluation, EvaluationEpisode
from webapp.evaluations.selectors import (
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
    evaluation_request_cancel,
)
from webapp.runs.selectors import run_for

MAX_PAGE_SIZE = 100
CHANGE_REFUSAL = (
    "only the evaluation's owner, or a user with evaluations.change_evaluation, may cancel it"
)
# The evaluations list without `limit`/`offset`: at most this many, with a Link to the rest.
EVALUATIONS_LIST_CAP = 200


class EvaluationOut(serializers.ModelSerializer):
    models = serializers.SerializerMethodField()
    environment = serializers.IntegerField(source="environment_id", allow_null=True)
    progress = serializers.SerializerMethodField()
    owner = serializers.CharField(source="owner.get_username")
    episode_seeds = serializers.ListField(child=serializers.IntegerField(), read_only=True)

    class Meta:
        model = Evaluation
        fields: tuple[str, ...] = (
            "id",
            "owner",
            "environment",
            "environment_name",
            "environment_key",
            "prompt",
            "models",
            "episodes",
            "seed",
            "episode_seeds",
            "settings",
            "source_run",
            "status",
            "progress",
            "error",
            "created_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
        )

    def get_models(self, evaluation: Evaluation) -> list[dict[str, Any]]:
        return [
            {
                "model": e["spec"],
                "label": e["label"],
                "title": e.get("title", e["label"]),
                "kind": e["kind"],
                "run": e.get("run"),
                "step": e.get("step"),
            }
            for e in evaluation.model_specs
        ]

    def get_progress(self, evaluation: Evaluation) -> dict[str, Any]:
        return evaluation_progress(evaluation=evaluation)


class EvaluationDetailOut(EvaluationOut):
    columns = serializers.SerializerMethodField()
    results = serializers.SerializerMethodField()
    checkpoints = serializers.SerializerMethodField()

    class Meta(EvaluationOut.Meta):
        fields = (*EvaluationOut.Meta.fields, "columns", "results", "checkpoints")

    def get_columns(self, evaluation: Evaluation) -> list[str]:
        return evaluation_columns(key=evaluation.environment_key)

    def get_results(self, evaluation: Evaluation) -> list[dict[str, Any]]:
        return evaluation_results(evaluation=evaluation)

    def get_checkpoints(self, evaluation: Evaluation) -> dict[str, Any] | None:
        return evaluation_checkpoint_series(evaluation=evaluation)


class EpisodeOut(serializers.ModelSerializer):
    class Meta:
        model = EvaluationEpisode
        fields = (
            "model_index",
            "model",
            "index",
            "seed",
            "reward",
            "won",
            "tool_calls",
            "tool_failures",
            "lost",
            "ended_by",
            "attributes",
            "messages",
            "created_at",
        )


class CheckpointsIn(serializers.Serializer):
    environment_index = serializers.IntegerField(default=0, min_value=0, max_value=7)
    episodes = serializers.IntegerField(default=10, min_value=1, max_value=200)
    seed = serializers.IntegerField(default=0, min_value=0, max_value=2**31 - 1)


def visible_evaluation(request: Any, pk: int) -> Evaluation:
    return get_object_or_404(evaluations_visible_to(user=request.user), pk=pk)


class EvaluationListApi(WriteThrottled, APIView):
    write_throttle_scope = "launch"

    @extend_schema(
        operation_id="evaluations_list", parameters=PAGE_PARAMETERS,
        responses=list_or_page_schema(EvaluationOut, "Evaluation", cap=EVALUATIONS_LIST_CAP),
    )
    def get(self, request: Request) -> Response:
        return list_or_page(
            request, evaluations_visible_to(user=request.user), lambda rows: EvaluationOut(rows, many=True).data,
            cap=EVALUATIONS_LIST_CAP,
        )

    @extend_schema(request=EvaluationRequest, responses={201: EvaluationDetailOut})
    def post(self, request: Request) -> Response:
        evaluation = evaluation_create(owner=signed_in_user(request), data=request.data)
        return Response(EvaluationDetailOut(evaluation).data, status=status.HTTP_201_CREATED)


class EvaluationDetailApi(APIView):
    @extend_schema(responses=EvaluationDetailOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(EvaluationDetailOut(visible_evaluation(request, pk)).data)


class EvaluationCancelApi(APIView):
    @extend_schema(request=None, responses=EvaluationOut)
    def post(self, request: Request, pk: int) -> Response:
        evaluation = visible_evaluation(request, pk)
        if not evaluation_can_change(user=request.user, evaluation=evaluation):
            raise PermissionDenied(CHANGE_REFUSAL)
        return Response(EvaluationOut(evaluation_request_cancel(evaluation=evaluation)).data)


class EpisodePageV1Out(serializers.Serializer):
    """Episodes by `page` and `page_size` (the v1 shape), with the one shape's links."""

    count = serializers.IntegerField(help_text="Episodes that match, on every page.")
    next = serializers.CharField(allow_null=True, help_text="The next page's URL; null on the last page.")
    previous = serializers.CharField(allow_null=True, help_text="The previous page's URL; null on the first.")
    page = serializers.IntegerField()
    page_size = serializers.IntegerField()
    results = EpisodeOut(many=True)


class EvaluationEpisodesApi(APIView):
    @extend_schema(
        operation_id="evaluations_episodes_list",
        parameters=[
            OpenApiParameter(
                "model", int, description="Only this model's episodes (its index in `models`)."
            ),
            OpenApiParameter("page", int, description="Without `limit`/`offset`: the page, from 1."),
            OpenApiParameter("page_size", int, description=f"At most {MAX_PAGE_SIZE}."),
            *PAGE_PARAMETERS,
        ],
        responses=PolymorphicProxySerializer(
            component_name="EpisodePageOrLimitPage",
            serializers=[EpisodePageV1Out, page_serializer(EpisodeOut, "Episode")],
            resource_type_field_name=None,
        ),
    )
    def get(self, request: Request, pk: int) -> Response:
        evaluation = visible_evaluation(request, pk)
        model_index = int_param(request, "model", None, 0, 10_000)
        episodes = evaluation_episodes(evaluation=evaluation, model_index=model_index)
        if wants_page(request):
            return list_or_page(request, episodes, lambda rows: EpisodeOut(rows, many=True).data)
        page = int_param(request, "page", 1, 1, 1_000_000) or 1
        size = int_param(request, "page_size", 20, 1, MAX_PAGE_SIZE) or 20
        count = episodes.count()
        chunk = episodes[(page - 1) * size : page * size]
        here = request.build_absolute_uri()
        return Response(
            {
                "count": count,
                "next": replace_query_param(here, "page", page + 1) if page * size < count else None,
                "previous": replace_query_param(here, "page", page - 1) if page > 1 else None,
                "page": page,
                "page_size": size,
                "results": EpisodeOut(chunk, many=True).data,
            }
        )


def results_csv(evaluation: Evaluation) -> HttpResponse:
    columns = evaluation_columns(key=evaluation.environment_key)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    for row in evaluation_results(evaluation=evaluation):
        writer.writerow(["" if row.get(c) is None else _csv_cell(row.get(c)) for c in columns])
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="evaluation-{evaluation.pk}.csv"'
    return response


def _csv_cell(value: Any) -> Any:
    text = str(value)
    # A spreadsheet runs a cell that starts with one of these as a formula; model names are user text.
    return (
        "'" + text
        if isinstance(value, str) and text[:1] in ("=", "+", "-", "@", "\t", "\r")
        else value
    )


class EvaluationCsvApi(APIView):
    @extend_schema(responses={(200, "text/csv"): str})
    def get(self, request: Request, pk: int) -> HttpResponse:
        return results_csv(visible_evaluation(request, pk))


class EvaluationEpisodesExportApi(StreamedExportApi):
    """Every episode, streamed."""

    @rows_export_schema
    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        evaluation = visible_evaluation(request, pk)
        writers = rows_writers(evaluation, episodes_jsonl, episodes_parquet)
        return self.export(request, writers=writers, filename=f"evaluation-{evaluation.pk}-episodes")


class RunEvaluateCheckpointsApi(APIView):
    throttle_scope = "launch"

    @extend_schema(request=CheckpointsIn, responses={201: EvaluationDetailOut})
    def post(self, request: Request, pk: int) -> Response:
        run = run_for(user=request.user, pk=pk)
        data = CheckpointsIn(data=request.data)
        data.is_valid(raise_exception=True)
        evaluation = evaluation_create_for_checkpoints(
            owner=signed_in_user(request), run=run, **data.validated_data
        )
        return Response(EvaluationDetailOut(evaluation).data, status=status.HTTP_201_CREATED)
