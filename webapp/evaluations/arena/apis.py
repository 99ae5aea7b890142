"""`GET /api/runs/compare/`: 2-6 runs on shared axes, and what differs in their configs."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.evaluations.arena.compare import (
    CompareError,
    compare_keys,
    compare_runs,
    compare_series,
    config_diff,
)
from webapp.runs.selectors import (
    runs_visible_to,
)


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
