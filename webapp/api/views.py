"""REST API v1 (see shared/docs/design.md): thin views over services and selectors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.api.serializers import (
    EnvironmentChangeIn,
    EnvironmentIn,
    EnvironmentOut,
    EnvironmentRegisteredOut,
    RolloutPageOut,
    RunDetailOut,
    RunEventOut,
    RunLaunchOut,
    RunOut,
    RunToolTableOut,
    WorkerOut,
)
from webapp.catalog.models import Environment
from webapp.catalog.selectors import (
    environment_for,
    environments_visible_to,
)
from webapp.catalog.services import (
    environment_container_stop,
    environment_measure_capacity,
    environment_probe,
    environment_set_shared,
    environments_register,
)
from webapp.core.export import FORMATS as EXPORT_FORMATS
from webapp.core.export import MEDIA_TYPES, StreamedExportApi
from webapp.core.params import int_param
from webapp.core.parsers import EnvlabJSONParser as JSONParser
from webapp.core.throttles import WriteThrottled
from webapp.evaluations.arena.compare import (
    CompareError,
    compare_keys,
    compare_runs,
    compare_series,
    config_diff,
)
from webapp.runs.config import RunConfig
from webapp.runs.demo import run_launch_demo
from webapp.runs.models import Run, WorkerHeartbeat
from webapp.runs.selectors import (
    RUN_CHANGE_REFUSAL,
    run_can_change,
    run_events,
    run_rollouts,
    runs_visible_to,
    runs_with_alerts,
)
from webapp.runs.services import (
    run_launch,
    run_request_cancel,
    run_resume,
)
from webapp.runs.telemetry.export import rollouts_jsonl, rollouts_parquet
from webapp.runs.telemetry.layout import RunLayoutRejected, run_layout_for, run_layout_save
from webapp.runs.telemetry.series import run_metric_keys, run_metric_series
from webapp.runs.telemetry.tools import run_tool_table


def _visible_environment(request: Request, pk: int) -> Environment:
    return environment_for(user=request.user, pk=pk)


def _controlled_environment(request: Request, pk: int) -> Environment:
    return environment_for(user=request.user, pk=pk, control=True)


class EnvironmentListApi(WriteThrottled, APIView):
    write_throttle_scope = "register"

    @extend_schema(responses=EnvironmentOut(many=True))
    def get(self, request: Request) -> Response:
        environments = environments_visible_to(user=request.user)
        return Response(EnvironmentOut(environments, many=True).data)

    @extend_schema(request=EnvironmentIn, responses={201: EnvironmentRegisteredOut})
    def post(self, request: Request) -> Response:
        data = EnvironmentIn(data=request.data)
        data.is_valid(raise_exception=True)
        environments = environments_register(owner=request.user, **data.validated_data)
        out = EnvironmentRegisteredOut(environments[0], context={"registered": environments})
        return Response(out.data, status=status.HTTP_201_CREATED)


class EnvironmentDetailApi(APIView):
    @extend_schema(responses=EnvironmentOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(EnvironmentOut(_visible_environment(request, pk)).data)

    @extend_schema(request=EnvironmentChangeIn, responses=EnvironmentOut)
    def patch(self, request: Request, pk: int) -> Response:
        environment = _controlled_environment(request, pk)
        data = EnvironmentChangeIn(data=request.data)
        data.is_valid(raise_exception=True)
        if "shared" in data.validated_data:
            environment = environment_set_shared(
                environment=environment, shared=data.validated_data["shared"]
            )
        return Response(EnvironmentOut(environment).data)


class EnvironmentCapacityApi(APIView):
    throttle_scope = "capacity"

    @extend_schema(request=None, responses=EnvironmentOut)
    def post(self, request: Request, pk: int) -> Response:
        environment = environment_measure_capacity(environment=_controlled_environment(request, pk))
        return Response(EnvironmentOut(environment).data)


class EnvironmentProbeApi(APIView):
    throttle_scope = "probe"

    @extend_schema(request=None, responses=EnvironmentOut)
    def post(self, request: Request, pk: int) -> Response:
        environment = environment_probe(environment=_controlled_environment(request, pk))
        return Response(EnvironmentOut(environment).data)


class EnvironmentContainerStopApi(APIView):
    """Stops and removes the container an image registration started; the entry stays."""

    @extend_schema(request=None, responses=EnvironmentOut)
    def post(self, request: Request, pk: int) -> Response:
        environment = environment_container_stop(environment=_controlled_environment(request, pk))
        return Response(EnvironmentOut(environment).data)


class RunListApi(WriteThrottled, APIView):
    write_throttle_scope = "launch"

    @extend_schema(responses=RunOut(many=True))
    def get(self, request: Request) -> Response:
        runs = runs_with_alerts(runs_visible_to(user=request.user))[:200]
        return Response(RunOut(runs, many=True).data)

    # The one run config schema, published as is: clients (and the schema fuzzer) see real bodies.
    @extend_schema(request=RunConfig, responses={201: RunLaunchOut})
    def post(self, request: Request) -> Response:
        run = run_launch(owner=request.user, data=request.data)
        return Response(RunLaunchOut(run).data, status=status.HTTP_201_CREATED)


class RunDemoApi(WriteThrottled, APIView):
    """The home page's demo button over the API: the same service, checks, quota and launch
    throttle; answers with the queued run as `GET /api/runs/<id>/` shows it."""

    write_throttle_scope = "launch"

    @extend_schema(request=None, responses={201: RunDetailOut})
    def post(self, request: Request) -> Response:
        run = run_launch_demo(owner=request.user)
        return Response(RunDetailOut(run).data, status=status.HTTP_201_CREATED)


def _visible_run(request: Request, pk: int) -> Run:
    return get_object_or_404(runs_visible_to(user=request.user), pk=pk)


def _changeable_run(request: Request, pk: int) -> Run:
    run = _visible_run(request, pk)
    if not run_can_change(user=request.user, run=run):
        raise PermissionDenied(RUN_CHANGE_REFUSAL)
    return run


class RunDetailApi(APIView):
    @extend_schema(responses=RunDetailOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(RunDetailOut(_visible_run(request, pk)).data)


class RunCancelApi(APIView):
    @extend_schema(request=None, responses=RunOut)
    def post(self, request: Request, pk: int) -> Response:
        return Response(RunOut(run_request_cancel(run=_changeable_run(request, pk))).data)


class RunResumeApi(APIView):
    throttle_scope = "launch"

    @extend_schema(request=None, responses=RunOut)
    def post(self, request: Request, pk: int) -> Response:
        return Response(RunOut(run_resume(run=_changeable_run(request, pk))).data)


class RunMetricsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("key", str, many=True),
            OpenApiParameter("max_points", int),
        ],
        responses=dict,
    )
    def get(self, request: Request, pk: int) -> Response:
        run = _visible_run(request, pk)
        keys = [k for k in request.query_params.getlist("key") if k]
        max_points = int_param(request, "max_points", 500, 1, 100_000)
        return Response({"series": run_metric_series(run=run, keys=keys, max_points=max_points)})


class RunMetricKeysApi(APIView):
    """Every key the run logged that can be charted (the run page's metric picker)."""

    @extend_schema(responses=dict)
    def get(self, request: Request, pk: int) -> Response:
        return Response({"keys": run_metric_keys(run=_visible_run(request, pk))})


class RunChartLayoutApi(APIView):
    """The signed-in user's chart layout, applied to every run page they open. PUT replaces
    it whole; from the page (session login) it needs the CSRF token."""

    parser_classes = [JSONParser]

    @extend_schema(responses=dict)
    def get(self, request: Request) -> Response:
        return Response(run_layout_for(user=request.user))

    @extend_schema(request=dict, responses=dict)
    def put(self, request: Request) -> Response:
        try:
            return Response(run_layout_save(user=request.user, data=request.data))
        except RunLayoutRejected as exc:
            raise ValidationError(exc.errors) from None


class RunRolloutsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("step", int),
            OpenApiParameter("env", str),
            OpenApiParameter("after_seq", int),
            OpenApiParameter(
                "before_seq", int, description="Newest first, below this seq (the next page keeps lowering it)."
            ),
            OpenApiParameter("limit", int),
        ],
        responses=RolloutPageOut,
    )
    def get(self, request: Request, pk: int) -> Response:
        run = _visible_run(request, pk)
        step = int_param(request, "step", None, 0, 10**9)
        after_seq = int_param(request, "after_seq", None, 0, 10**15)
        before_seq = int_param(request, "before_seq", None, 1, 10**15)
        limit = int_param(request, "limit", 50, 1, 500)
        rows = list(
            run_rollouts(
                run=run, step=step, env=request.query_params.get("env") or None, after_seq=after_seq,
                before_seq=before_seq,
            )[: limit + 1]
        )
        cursor = "after_seq" if before_seq is None else "before_seq"
        page, next_url = _keyset_page(request, rows, limit, cursor, lambda row: row.seq)
        return Response(RolloutPageOut({"results": page, "next": next_url}).data)


class RunCompareApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("run", int, many=True), OpenApiParameter("key", str)],
        responses=dict,
    )
    def get(self, request: Request) -> Response:
        try:
            runs = compare_runs(visible=runs_visible_to(user=request.user), ids=request.query_params.getlist("run"))
        except CompareError as exc:
            raise ValidationError({"run": [str(exc)]}) from None
        keys = compare_keys(runs)
        key = request.query_params.get("key") or "reward"
        if key not in keys:
            raise ValidationError({"key": [f"none of these runs logged '{key[:120]}'"]})
        series = compare_series(runs, key=key)
        return Response({
            "runs": [{"id": run.pk, "name": run.name, "status": run.status} for run in runs],
            "keys": keys,
            "key": key,
            "series": {str(pk): points for pk, points in series.items()},
            "config_diff": config_diff(runs),
        })


class RunRolloutsExportApi(StreamedExportApi):
    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=list(EXPORT_FORMATS))],
        responses={(200, MEDIA_TYPES["jsonl"]): bytes, (200, MEDIA_TYPES["parquet"]): bytes},
    )
    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        run = _visible_run(request, pk)
        return self.export(
            request,
            writers={"jsonl": lambda: rollouts_jsonl(run), "parquet": lambda: rollouts_parquet(run)},
            filename=f"run-{run.pk}-rollouts",
        )


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
        responses=dict,
    )
    def get(self, request: Request, pk: int) -> Response:
        run = _visible_run(request, pk)
        after = int_param(request, "after", None, 0, 10**15)
        limit = int_param(request, "limit", 100, 1, 500)
        rows = list(run_events(run=run, after_id=after)[: limit + 1])
        page, next_url = _keyset_page(request, rows, limit, "after", lambda row: row.pk)
        return Response({"results": RunEventOut(page, many=True).data, "next": next_url})


class RunToolsApi(APIView):
    """The run's tool table: calls, failures, latency and errors per tool, for the whole run."""

    @extend_schema(responses=RunToolTableOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(RunToolTableOut(run_tool_table(run=_visible_run(request, pk))).data)


class WorkerListApi(APIView):
    @extend_schema(responses=WorkerOut(many=True))
    def get(self, request: Request) -> Response:
        workers = list(WorkerHeartbeat.objects.order_by("name"))
        # Which run a worker trains is shown only to those who may see that run.
        busy = {w.current_run_id for w in workers if w.current_run_id is not None}
        visible = set(
            runs_visible_to(user=request.user).filter(pk__in=busy).values_list("pk", flat=True)
        )
        return Response(WorkerOut(workers, many=True, context={"visible_runs": visible}).data)


# --- catalog snapshots (webapp.catalog.snapshot) ----------------------------------------------
# Imported here, not at the top: this section is appended by its own change.
import json  # noqa: E402

from rest_framework.parsers import FormParser, MultiPartParser  # noqa: E402

from webapp.api.serializers import (  # noqa: E402
    CatalogEntryRegisterIn,
    CatalogSnapshotIn,
    CatalogSnapshotOut,
)
from webapp.catalog.snapshot import (  # noqa: E402
    MAX_SNAPSHOT_BYTES,
    CatalogSnapshotRejected,
    catalog_entry_register,
    catalog_snapshot_import,
    catalog_snapshot_name_from_filename,
    catalog_snapshot_too_big,
    catalog_snapshots_visible_to,
)


def _snapshot_bytes(data: dict) -> tuple[bytes, str]:
    """The file's bytes (at most one over the limit) and a default name, from either input."""
    upload, content = data.get("file"), data.get("snapshot")
    if (upload is None) == (content is None):
        raise CatalogSnapshotRejected(
            {"file": ["give the catalog file as the multipart field 'file', or its content as "
                      "'snapshot' in a JSON body (one of the two)"]}
        )
    if upload is not None:
        upload.seek(0)
        return bytes(upload.read(MAX_SNAPSHOT_BYTES + 1)), catalog_snapshot_name_from_filename(
            upload.name or ""
        )
    if isinstance(content, str):
        return content.encode("utf-8"), ""
    publisher = content.get("publisher") if isinstance(content, dict) else None
    try:
        raw = json.dumps(content, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError:
        raise CatalogSnapshotRejected({"snapshot": ["contains a non-finite number"]}) from None
    return raw, publisher[:100] if isinstance(publisher, str) else ""


class CatalogSnapshotListApi(APIView):
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(responses=CatalogSnapshotOut(many=True))
    def get(self, request: Request) -> Response:
        snapshots = catalog_snapshots_visible_to(user=request.user)[:100]
        return Response(CatalogSnapshotOut(snapshots, many=True).data)

    @extend_schema(request=CatalogSnapshotIn, responses={201: CatalogSnapshotOut})
    def post(self, request: Request) -> Response:
        too_big = catalog_snapshot_too_big(content_length=request.META.get("CONTENT_LENGTH"))
        if too_big is not None:  # before request.data reads the body
            raise too_big
        data = CatalogSnapshotIn(data=request.data)
        data.is_valid(raise_exception=True)
        raw, default_name = _snapshot_bytes(data.validated_data)
        try:
            snapshot = catalog_snapshot_import(
                owner=request.user, raw=raw, name=data.validated_data["name"] or default_name
            )
        except CatalogSnapshotRejected as exc:
            if "snapshot" in data.validated_data and "file" in exc.errors:
                # The content came as the JSON field `snapshot`: name that field.
                exc.errors["snapshot"] = exc.errors.pop("file")
            raise
        return Response(CatalogSnapshotOut(snapshot).data, status=status.HTTP_201_CREATED)


class CatalogSnapshotDetailApi(APIView):
    @extend_schema(responses=CatalogSnapshotOut)
    def get(self, request: Request, pk: int) -> Response:
        snapshot = get_object_or_404(catalog_snapshots_visible_to(user=request.user), pk=pk)
        return Response(CatalogSnapshotOut(snapshot).data)


class CatalogEntryRegisterApi(APIView):
    throttle_scope = "register"

    """Probes the server (and may start a bundled one, waiting for its /health) before it answers."""

    @extend_schema(request=CatalogEntryRegisterIn, responses={201: EnvironmentOut})
    def post(self, request: Request, pk: int) -> Response:
        snapshot = get_object_or_404(catalog_snapshots_visible_to(user=request.user), pk=pk)
        data = CatalogEntryRegisterIn(data=request.data)
        data.is_valid(raise_exception=True)
        environment = catalog_entry_register(owner=request.user, snapshot=snapshot, **data.validated_data)
        return Response(EnvironmentOut(environment).data, status=status.HTTP_201_CREATED)
