"""REST API for runs (shared/docs/design.md): launch, list, detail, cancel, resume, metrics,
rollouts (pages, steps, export), events, tools, the chart layout, and the workers; thin views
over webapp.runs' services and selectors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from envs.adapters.tool_metrics import MAX_TOOL_NAME, safe_tool_name
from webapp.core.export import MEDIA_TYPES, StreamedExportApi, rows_export_schema, rows_writers
from webapp.core.paging import PAGE_PARAMETERS, list_or_page, list_or_page_schema
from webapp.core.params import bool_param, float_param, int_param, text_param
from webapp.core.parsers import EnvlabJSONParser as JSONParser
from webapp.core.throttles import WriteThrottled
from webapp.core.users import signed_in_user
from webapp.runs.config import RunConfig
from webapp.runs.demo import run_launch_demo
from webapp.runs.external import external_run_create, external_run_finish, external_run_log
from webapp.runs.labels import run_delete, run_labels_update
from webapp.runs.models import Run, WorkerHeartbeat
from webapp.runs.presets import preset_config_for, presets
from webapp.runs.selectors import (
    run_events,
    run_for,
    run_rollout_steps,
    runs_visible_to,
    runs_with_alerts,
)
from webapp.runs.serializers import (
    ExternalFinishIn,
    ExternalLogIn,
    ExternalLogOut,
    ExternalRunIn,
    MetricKeysOut,
    MetricSeriesOut,
    PresetOut,
    RolloutPageOut,
    RolloutStepsOut,
    RunChartLayoutOut,
    RunDetailOut,
    RunEventOut,
    RunEventPageOut,
    RunLabelsIn,
    RunLaunchOut,
    RunOut,
    RunResumeIn,
    RunRowOut,
    RunToolTableOut,
    WorkerOut,
)
from webapp.runs.services import (
    run_launch,
    run_request_cancel,
    run_resume,
)
from webapp.runs.table import (
    MAX_SUMMARY_KEYS,
    ORDERING_FIELDS,
    runs_metric_summaries,
    runs_table,
    summary_keys,
)
from webapp.runs.telemetry.export import rollouts_jsonl, rollouts_parquet
from webapp.runs.telemetry.layout import RunLayoutRejected, run_layout_for, run_layout_save
from webapp.runs.telemetry.metrics_export import metrics_csv, metrics_parquet
from webapp.runs.telemetry.search import (
    ROLLOUT_ORDERINGS,
    SEARCH_SCAN_LIMIT,
    RolloutSearch,
    run_rollout_search,
)
from webapp.runs.telemetry.series import run_metric_keys, run_metric_series
from webapp.runs.telemetry.tools import run_tool_table

# The runs list without `limit`/`offset` (its v1 shape): at most this many, with a Link to the rest.
RUNS_LIST_CAP = 200


class RunRolloutStepsApi(APIView):
    @extend_schema(responses=RolloutStepsOut, description="{last_seq, steps: [[step, rollouts], ...]}, newest step first.")
    def get(self, request: Request, pk: int) -> Response:
        run = run_for(user=request.user, pk=pk)
        # The seq is read first: every rollout counted is at or below it, later ones are live.
        last_seq = run.last_seq
        return Response({"last_seq": last_seq, "steps": run_rollout_steps(run=run, through_seq=last_seq)})


class RunListApi(WriteThrottled, APIView):
    write_throttle_scope = "launch"

    @extend_schema(
        operation_id="runs_list",
        parameters=[
            OpenApiParameter("status", str, many=True, enum=list(Run.Status.values), description="Any of these."),
            OpenApiParameter("tag", str, many=True, description="Tag slugs: runs with all of them."),
            OpenApiParameter("group", str),
            OpenApiParameter("environment", int, description="A catalog entry's id."),
            OpenApiParameter("model", str, description="Exactly as the run shows it (`run:<id>@<step>` for a checkpoint)."),
            OpenApiParameter("search", str, description="In the name, notes, group and model, any case."),
            OpenApiParameter(
                "ordering", str,
                description=f"One of {', '.join(ORDERING_FIELDS)}, '-' first for descending; newest first without it.",
            ),
            OpenApiParameter("summary", str, many=True, description=f"Metric keys (at most {MAX_SUMMARY_KEYS})."),
            *PAGE_PARAMETERS,
        ],
        responses=list_or_page_schema(RunRowOut, "Run", cap=RUNS_LIST_CAP),
    )
    def get(self, request: Request) -> Response:
        runs = runs_table(runs=runs_with_alerts(runs_visible_to(user=request.user)), params=request.query_params)
        keys = summary_keys(request.query_params)
        return list_or_page(
            request, runs, lambda rows: RunRowOut(rows, many=True, context=_summaries_context(rows, keys)).data,
            cap=RUNS_LIST_CAP,
        )

    # The one run config schema, published as is: clients (and the schema fuzzer) see real bodies.
    @extend_schema(request=RunConfig, responses={201: RunLaunchOut})
    def post(self, request: Request) -> Response:
        run = run_launch(owner=signed_in_user(request), data=request.data)
        return Response(RunLaunchOut(run).data, status=status.HTTP_201_CREATED)


def _summaries_context(rows: list[Run], keys: list[str]) -> dict[str, Any]:
    return {"summaries": runs_metric_summaries(run_ids=[run.pk for run in rows], keys=keys)}


class PresetListApi(APIView):
    @extend_schema(
        operation_id="presets_list", parameters=PAGE_PARAMETERS, responses=list_or_page_schema(PresetOut, "Preset")
    )
    def get(self, request: Request) -> Response:
        user = signed_in_user(request)
        rows = [{**vars(preset), "config": preset_config_for(preset=preset, user=user)} for preset in presets()]
        return list_or_page(request, rows, lambda page: PresetOut(page, many=True).data)


class RunDemoApi(WriteThrottled, APIView):
    """The home page's demo button over the API: the same service, checks, quota and launch
    throttle; answers with the queued run as `GET /api/runs/<id>/` shows it."""

    write_throttle_scope = "launch"

    @extend_schema(request=None, responses={201: RunDetailOut})
    def post(self, request: Request) -> Response:
        run = run_launch_demo(owner=signed_in_user(request))
        return Response(RunDetailOut(run).data, status=status.HTTP_201_CREATED)


def _visible_run(request: Request, pk: int) -> Run:
    return run_for(user=request.user, pk=pk)


def _changeable_run(request: Request, pk: int) -> Run:
    return run_for(user=request.user, pk=pk, change=True)


def _owned_run(request: Request, pk: int) -> Run:
    run = _visible_run(request, pk)
    if run.owner_id != request.user.pk:
        raise PermissionDenied(RUN_OWNER_ONLY)
    return run


RUN_OWNER_ONLY = "only the run's owner may edit or delete it"


class RunDetailApi(APIView):
    parser_classes = (JSONParser,)

    @extend_schema(responses=RunDetailOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(RunDetailOut(_visible_run(request, pk)).data)

    @extend_schema(
        request=RunLabelsIn, responses=RunDetailOut,
        description="Edit the name, tags (replaced whole), group and notes; the owner's only. All or nothing.",
    )
    def patch(self, request: Request, pk: int) -> Response:
        run = run_labels_update(run=_owned_run(request, pk), data=request.data)
        return Response(RunDetailOut(_visible_run(request, run.pk)).data)

    @extend_schema(
        request=None, responses={204: None},
        description=(
            "Remove a finished run of yours with everything it recorded and its folder (checkpoints). "
            "409 while it is queued or running, or while queued or running work uses its checkpoints."
        ),
    )
    def delete(self, request: Request, pk: int) -> Response:
        run_delete(run=_owned_run(request, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class RunCancelApi(APIView):
    @extend_schema(request=None, responses=RunOut)
    def post(self, request: Request, pk: int) -> Response:
        return Response(RunOut(run_request_cancel(run=_changeable_run(request, pk))).data)


class RunResumeApi(APIView):
    throttle_scope = "launch"

    @extend_schema(request=RunResumeIn, responses=RunOut)
    def post(self, request: Request, pk: int) -> Response:
        run = _changeable_run(request, pk)
        if not isinstance(request.data, dict):
            raise ValidationError('the body must be a JSON object, {"checkpoint": <step>}, or empty')
        body = RunResumeIn(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(RunOut(run_resume(run=run, checkpoint=body.validated_data.get("checkpoint"))).data)


class RunExternalApi(WriteThrottled, APIView):
    """A run trained outside the lab (envlab_client.trl.EnvlabCallback): running at once, no task."""

    parser_classes = (JSONParser,)
    write_throttle_scope = "launch"

    @extend_schema(request=ExternalRunIn, responses={201: RunDetailOut})
    def post(self, request: Request) -> Response:
        run = external_run_create(owner=signed_in_user(request), data=request.data)
        return Response(RunDetailOut(_visible_run(request, run.pk)).data, status=status.HTTP_201_CREATED)


class RunLogApi(APIView):
    parser_classes = (JSONParser,)

    @extend_schema(
        request=ExternalLogIn, responses=ExternalLogOut,
        description=(
            "One step of an external run, the owner's only: the same write as the lab's worker (a step logged "
            "again replaces its values; live notes on the run's socket). 409 once the run has ended."
        ),
    )
    def post(self, request: Request, pk: int) -> Response:
        return Response(ExternalLogOut(external_run_log(run=_owned_run(request, pk), data=request.data)).data)


class RunFinishApi(APIView):
    parser_classes = (JSONParser,)

    @extend_schema(
        request=ExternalFinishIn, responses=RunDetailOut,
        description="End an external run (succeeded by default); the owner's only. 409 once it has ended.",
    )
    def post(self, request: Request, pk: int) -> Response:
        run = external_run_finish(run=_owned_run(request, pk), data=request.data)
        return Response(RunDetailOut(run).data)


class RunMetricsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("key", str, many=True),
            OpenApiParameter("max_points", int),
        ],
        responses=MetricSeriesOut,
    )
    def get(self, request: Request, pk: int) -> Response:
        run = _visible_run(request, pk)
        keys = [k for k in request.query_params.getlist("key") if k]
        max_points = int_param(request, "max_points", 500, 1, 100_000)
        return Response({"series": run_metric_series(run=run, keys=keys, max_points=max_points)})


class RunMetricsExportApi(StreamedExportApi):
    """Every point of the run's metrics, raw and streamed: `key` (repeatable; all keys when
    absent), `format` csv (default) or parquet; columns step, key, value."""

    @extend_schema(
        parameters=[
            OpenApiParameter("key", str, many=True),
            OpenApiParameter("format", str, enum=["csv", "parquet"]),
        ],
        responses={(200, MEDIA_TYPES["csv"]): str, (200, MEDIA_TYPES["parquet"]): bytes},
    )
    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        run = _visible_run(request, pk)
        keys = [k for k in request.query_params.getlist("key") if k]
        return self.export(
            request,
            writers={
                "csv": lambda: metrics_csv(run=run, keys=keys),
                "parquet": lambda: metrics_parquet(run=run, keys=keys),
            },
            filename=f"run-{run.pk}-metrics",
        )


class RunMetricKeysApi(APIView):
    """Every key the run logged that can be charted (the run page's metric picker)."""

    @extend_schema(responses=MetricKeysOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response({"keys": run_metric_keys(run=_visible_run(request, pk))})


class RunChartLayoutApi(APIView):
    """The signed-in user's chart layout, applied to every run page they open. PUT replaces
    it whole; from the page (session login) it needs the CSRF token."""

    parser_classes = (JSONParser,)

    @extend_schema(responses=RunChartLayoutOut)
    def get(self, request: Request) -> Response:
        return Response(run_layout_for(user=signed_in_user(request)))

    @extend_schema(request=dict, responses=RunChartLayoutOut)
    def put(self, request: Request) -> Response:
        try:
            return Response(run_layout_save(user=signed_in_user(request), data=request.data))
        except RunLayoutRejected as exc:
            raise ValidationError(exc.errors) from None


class RunRolloutsApi(APIView):
    """The run's rollouts, filtered and ordered. By seq the pages are a keyset (`after_seq`
    oldest first, `before_seq` newest first); by reward or advantage they go by `offset`."""

    @extend_schema(
        parameters=[
            OpenApiParameter("step", int),
            OpenApiParameter("env", str),
            OpenApiParameter("after_seq", int),
            OpenApiParameter(
                "before_seq", int, description="Newest first, below this seq (the next page keeps lowering it)."
            ),
            OpenApiParameter("limit", int),
            OpenApiParameter("min_reward", float, description="Rollouts whose reward is at least this."),
            OpenApiParameter("max_reward", float, description="Rollouts whose reward is at most this."),
            OpenApiParameter("term", str, description="Rollouts where this reward term has a value."),
            OpenApiParameter("term_min", float, description="With `term`: that term's value is at least this."),
            OpenApiParameter(
                "tool", str,
                description="Rollouts whose transcript has a result of this tool. Rollouts stored before "
                "tool facts were recorded count as using no tool.",
            ),
            OpenApiParameter(
                "tool_failed", bool,
                description="true: a call of `tool` (of any tool without `tool`) failed; false: none did.",
            ),
            OpenApiParameter("unscored", bool, description="true: only the unscored (lost) rollouts; false: none."),
            OpenApiParameter(
                "q", str,
                description="Words of the transcript's text. PostgreSQL: full-text over every rollout; SQLite: "
                f"a substring of the newest {SEARCH_SCAN_LIMIT} rollouts only (`search` in the response says which).",
            ),
            OpenApiParameter(
                "ordering", str, enum=list(ROLLOUT_ORDERINGS),
                description="seq (the default; -seq with `before_seq`) and -seq page by keyset (`after_seq` / "
                "`before_seq` in `next`); by reward or advantage (rows without one last, ties by seq) the pages "
                "go by `offset`.",
            ),
            OpenApiParameter("offset", int, description="With ordering by reward or advantage: rows to skip."),
        ],
        responses=RolloutPageOut,
    )
    def get(self, request: Request, pk: int) -> Response:
        run = _visible_run(request, pk)
        step = int_param(request, "step", None, 0, 10**9)
        after_seq = int_param(request, "after_seq", None, 0, 10**15)
        before_seq = int_param(request, "before_seq", None, 1, 10**15)
        limit = int_param(request, "limit", 50, 1, 500)
        search, ordering = _rollout_search(request, before_seq)
        offset = int_param(request, "offset", 0, 0, 10**6) or 0
        if offset and ordering.lstrip("-") == "seq":
            raise ValidationError({"offset": ["only with ordering by reward or advantage; by seq, page with "
                                              "after_seq or before_seq"]})
        # Every match, in order; the page's cursor narrows it, the count does not (the same on every page).
        matching, found = run_rollout_search(
            run=run, search=search, ordering=ordering, step=step, env=request.query_params.get("env") or None,
        )
        rows = matching
        if after_seq is not None:
            rows = rows.filter(seq__gt=after_seq)
        if before_seq is not None:
            rows = rows.filter(seq__lt=before_seq)
        previous = None
        if ordering.lstrip("-") == "seq":
            fetched = list(rows[: limit + 1])
            cursor = "after_seq" if ordering == "seq" else "before_seq"
            page, next_url = _keyset_page(request, fetched, limit, cursor, lambda row: row.seq)
        else:
            fetched = list(rows[offset : offset + limit + 1])
            page, next_url = _keyset_page(request, fetched, limit, "offset", lambda row: offset + limit)
            if offset:
                previous = replace_query_param(request.build_absolute_uri(), "offset", max(0, offset - limit))
        return Response(RolloutPageOut({
            "count": matching.count(), "next": next_url, "previous": previous, "results": page, "search": found,
        }).data)


def _rollout_search(request: Request, before_seq: int | None) -> tuple[RolloutSearch, str]:
    """The search and ordering parameters, each refused by name when it is not valid."""
    term = text_param(request, "term", 200)
    term_min = float_param(request, "term_min")
    if term_min is not None and term is None:
        raise ValidationError({"term_min": ["needs `term`, the reward term it bounds"]})
    tool = text_param(request, "tool", MAX_TOOL_NAME)
    if tool is not None and safe_tool_name(tool) != tool:
        raise ValidationError({"tool": ["a tool name has only letters, digits, '_', '.' and '-'"]})
    min_reward, max_reward = float_param(request, "min_reward"), float_param(request, "max_reward")
    if min_reward is not None and max_reward is not None and min_reward > max_reward:
        raise ValidationError({"max_reward": ["must not be below min_reward"]})
    ordering = request.query_params.get("ordering") or ("seq" if before_seq is None else "-seq")
    if ordering not in ROLLOUT_ORDERINGS:
        raise ValidationError({"ordering": [f"must be one of {', '.join(ROLLOUT_ORDERINGS)}"]})
    search = RolloutSearch(
        min_reward=min_reward, max_reward=max_reward, term=term, term_min=term_min, tool=tool,
        tool_failed=bool_param(request, "tool_failed"), unscored=bool_param(request, "unscored"),
        q=text_param(request, "q", 200),
    )
    return search, ordering


class RunRolloutsExportApi(StreamedExportApi):
    @rows_export_schema
    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        run = _visible_run(request, pk)
        writers = rows_writers(run, rollouts_jsonl, rollouts_parquet)
        return self.export(request, writers=writers, filename=f"run-{run.pk}-rollouts")


def _keyset_page(
    request: Request, rows: list[Any], limit: int, cursor: str, key: Callable[[Any], int]
) -> tuple[list[Any], str | None]:
    """The first `limit` of `rows` (fetched as limit + 1), and the URL of the next page: the
    same query with `cursor` set past the last row shown, or None when there is no more."""
    page = rows[:limit]
    if len(rows) <= limit:
        return page, None
    params = request.query_params.copy()
    params[cursor] = str(key(page[-1]))
    params["limit"] = str(limit)
    return page, request.build_absolute_uri(f"{request.path}?{params.urlencode()}")


class RunEventsApi(APIView):
    """The run's events by id, oldest first; `after`: only those with a larger id (the run
    page asks for what came after the last one it lists). Paginated like the rollouts."""

    @extend_schema(
        parameters=[OpenApiParameter("after", int), OpenApiParameter("limit", int)],
        responses=RunEventPageOut,
    )
    def get(self, request: Request, pk: int) -> Response:
        run = _visible_run(request, pk)
        after = int_param(request, "after", None, 0, 10**15)
        limit = int_param(request, "limit", 100, 1, 500)
        rows = list(run_events(run=run, after_id=after)[: limit + 1])
        page, next_url = _keyset_page(request, rows, limit, "after", lambda row: row.pk)
        return Response({
            "count": run_events(run=run).count(), "next": next_url, "previous": None,
            "results": RunEventOut(page, many=True).data,
        })


class RunToolsApi(APIView):
    """The run's tool table: calls, failures, latency and errors per tool, for the whole run."""

    @extend_schema(responses=RunToolTableOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(RunToolTableOut(run_tool_table(run=_visible_run(request, pk))).data)


class WorkerListApi(APIView):
    @extend_schema(
        operation_id="workers_list", parameters=PAGE_PARAMETERS, responses=list_or_page_schema(WorkerOut, "Worker")
    )
    def get(self, request: Request) -> Response:
        def serialize(workers: list[WorkerHeartbeat]) -> Any:
            # Which run a worker trains is shown only to those who may see that run.
            busy = {w.current_run_id for w in workers if w.current_run_id is not None}
            visible = set(runs_visible_to(user=request.user).filter(pk__in=busy).values_list("pk", flat=True))
            return WorkerOut(workers, many=True, context={"visible_runs": visible}).data

        return list_or_page(request, WorkerHeartbeat.objects.order_by("name"), serialize)
