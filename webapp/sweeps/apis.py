"""REST API for sweeps: create and list, one sweep with its members, cancel the rest; thin views
over webapp.sweeps' services and selectors."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.core.paging import PAGE_PARAMETERS, list_or_page, list_or_page_schema
from webapp.core.params import text_param
from webapp.core.parsers import EnvlabJSONParser as JSONParser
from webapp.core.throttles import WriteThrottled
from webapp.core.users import signed_in_user
from webapp.runs.table import METRIC_KEY_MAX_LENGTH
from webapp.sweeps.models import Sweep
from webapp.sweeps.selectors import (
    DEFAULT_METRIC,
    sweep_can_change,
    sweep_status_counts,
    sweep_table,
    sweeps_visible_to,
)
from webapp.sweeps.serializers import SweepCancelRestOut, SweepDetailOut, SweepIn, SweepOut
from webapp.sweeps.services import sweep_cancel_rest, sweep_create

SWEEP_CHANGE_REFUSAL = "only the sweep's owner, or a user with the permission runs.change_run, may cancel its rest"


def sweep_row(sweep: Sweep) -> dict[str, Any]:
    counts = sweep_status_counts(sweep=sweep)
    return {
        "id": sweep.pk, "name": sweep.name, "method": sweep.method, "count": sweep.count, "seed": sweep.seed,
        "status": sweep.status, "grid": sweep.grid, "created_at": sweep.created_at, "finished_at": sweep.finished_at,
        "size": sum(counts.values()), "statuses": counts, "url": reverse("sweep-detail", args=[sweep.pk]),
    }


def sweep_detail(sweep: Sweep, *, metric: str) -> dict[str, Any]:
    table = sweep_table(sweep=sweep, metric=metric)
    return {**sweep_row(sweep), "base": sweep.base, "paths": table["paths"], "metric": metric,
            "members": table["members"]}


# The sweeps list without `limit`/`offset`: at most this many, with a Link to the rest.
SWEEPS_LIST_CAP = 200


class SweepListApi(WriteThrottled, APIView):
    write_throttle_scope = "launch"
    parser_classes = (JSONParser,)

    @extend_schema(
        operation_id="sweeps_list", parameters=PAGE_PARAMETERS,
        responses=list_or_page_schema(SweepOut, "Sweep", cap=SWEEPS_LIST_CAP),
        description="The sweeps the caller sees, newest first.",
    )
    def get(self, request: Request) -> Response:
        return list_or_page(
            request, sweeps_visible_to(user=request.user),
            lambda rows: SweepOut([sweep_row(sweep) for sweep in rows], many=True).data, cap=SWEEPS_LIST_CAP,
        )

    @extend_schema(
        request=SweepIn, responses={201: SweepDetailOut},
        description=(
            "Make a run of every member (each member's config checked as POST /api/runs/ checks it, all before "
            "any is made: one 400 names members.<index>.<field>), in one transaction, grouped by the sweep's "
            "name. As many are queued as the caller's quota has room for; the rest wait as `pending` and are "
            "queued as runs end."
        ),
    )
    def post(self, request: Request) -> Response:
        sweep = sweep_create(owner=signed_in_user(request), data=request.data)
        return Response(SweepDetailOut(sweep_detail(sweep, metric=DEFAULT_METRIC)).data,
                        status=status.HTTP_201_CREATED)


class SweepDetailApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("metric", str, description=f"The metric summarised per member ({DEFAULT_METRIC} "
                                     "when left out).")],
        responses=SweepDetailOut,
    )
    def get(self, request: Request, pk: int) -> Response:
        sweep = get_object_or_404(sweeps_visible_to(user=request.user), pk=pk)
        metric = text_param(request, "metric", METRIC_KEY_MAX_LENGTH) or DEFAULT_METRIC
        return Response(SweepDetailOut(sweep_detail(sweep, metric=metric)).data)


class SweepCancelRestApi(APIView):
    @extend_schema(request=None, responses=SweepCancelRestOut,
                   description="Cancel the members still pending; queued and running ones go on.")
    def post(self, request: Request, pk: int) -> Response:
        sweep = get_object_or_404(sweeps_visible_to(user=request.user), pk=pk)
        if not sweep_can_change(user=request.user, sweep=sweep):
            raise PermissionDenied(SWEEP_CHANGE_REFUSAL)
        cancelled = sweep_cancel_rest(sweep=sweep)
        sweep.refresh_from_db()
        return Response(SweepCancelRestOut({"cancelled": cancelled, "sweep": sweep_row(sweep)}).data)
