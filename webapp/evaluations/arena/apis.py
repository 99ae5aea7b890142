"""`GET /api/runs/compare/`: 2-6 runs (up to 24 grouped) on shared axes, and what differs in
their configs."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.evaluations.arena.compare import (
    CompareError,
    compare_figure,
    compare_series,
    comparison_parse,
    config_diff,
)
from webapp.runs.selectors import (
    runs_visible_to,
)
from webapp.runs.telemetry.groups import group_figure, group_stats


class RunCompareApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("run", int, many=True),
            OpenApiParameter("key", str, many=True, description="one chart per key (at most 8); default reward"),
            OpenApiParameter(
                "group_by", str, description="group, tag or config.<dotted path>: per group a mean with a band"
            ),
            OpenApiParameter("band", str, enum=["minmax", "std"]),
        ],
        responses=dict,
    )
    def get(self, request: Request) -> Response:
        try:
            comparison = comparison_parse(visible=runs_visible_to(user=request.user), params=request.query_params)
        except CompareError as exc:
            raise ValidationError({exc.field: [str(exc)]}) from None
        runs = comparison.runs
        charts = []
        for key in comparison.shown:
            series = compare_series(runs, key=key)
            chart: dict = {"key": key, "series": {str(pk): points for pk, points in series.items()}}
            if comparison.group_by:
                chart["groups"] = group_stats(series, comparison.groups)
                chart["figure"] = group_figure(chart["groups"], key=key, band=comparison.band)
            else:
                chart["figure"] = compare_figure(runs, series, key=key)
            charts.append(chart)
        body = {
            "runs": [{"id": run.pk, "name": run.name, "status": run.status} for run in runs],
            "keys": comparison.keys,
            # The first chart's, as before charts were many.
            "key": charts[0]["key"],
            "series": charts[0]["series"],
            "charts": charts,
            "config_diff": config_diff(runs),
        }
        if comparison.group_by:
            body["group_by"] = comparison.group_by
            body["band"] = comparison.band
            body["groups"] = [{"group": label, "runs": members} for label, members in comparison.groups.items()]
        return Response(body)
