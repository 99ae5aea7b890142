"""`GET /api/runs/compare/`: 2-6 runs (up to 24 grouped) on shared axes, and what differs in
their configs."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.evaluations.arena.compare import (
    MISSING,
    CompareError,
    compare_figure,
    compare_series,
    comparison_parse,
    config_diff,
)
from webapp.runs.models import Run
from webapp.runs.selectors import (
    runs_visible_to,
)
from webapp.runs.telemetry.groups import BANDS, group_figure, group_stats

# The three lines of a group's band (webapp/runs/telemetry/groups.py group_figure), in order.
TRACE_ROLES = ("band-lower", "band-upper", "mean")


def _points(help_text: str) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2), help_text=help_text
    )


def _series() -> serializers.DictField:
    return serializers.DictField(
        child=_points("[step, value] pairs by step, at most 500 (cut as `GET /api/runs/<id>/metrics/` cuts them)."),
        help_text="{run id: points}; a run that did not log the key has [].",
    )


class CompareRunOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=Run.Status.choices)


class CompareGroupStatsOut(serializers.Serializer):
    """One group's line at each step any of its runs logged (webapp/runs/telemetry/groups.py)."""

    group = serializers.CharField()
    runs = serializers.ListField(child=serializers.IntegerField())
    steps = serializers.ListField(child=serializers.IntegerField())
    count = serializers.ListField(child=serializers.IntegerField(), help_text="Runs that logged each step.")
    mean = serializers.ListField(child=serializers.FloatField())
    min = serializers.ListField(child=serializers.FloatField())
    max = serializers.ListField(child=serializers.FloatField())
    std = serializers.ListField(child=serializers.FloatField(), help_text="Population standard deviation.")


class PlotlyTraceMetaOut(serializers.Serializer):
    run = serializers.IntegerField(required=False, help_text="Ungrouped: the run it draws.")
    group = serializers.CharField(required=False, help_text="Grouped: the group it draws.")
    role = serializers.ChoiceField(
        choices=list(TRACE_ROLES), required=False, help_text="Grouped: which of its three lines."
    )


class PlotlyTraceOut(serializers.Serializer):
    """A Plotly scatter trace; styling keys (line, fill, legendgroup...) pass through as Plotly takes them."""

    type = serializers.CharField()
    mode = serializers.CharField()
    name = serializers.CharField(help_text="User text, with < and > replaced.")
    x = serializers.ListField(child=serializers.FloatField(), help_text="Steps.")
    y = serializers.ListField(child=serializers.FloatField())
    meta = PlotlyTraceMetaOut()


class PlotlyFigureOut(serializers.Serializer):
    data = PlotlyTraceOut(many=True)  # type: ignore[assignment]  # DRF's metaclass takes declared fields off the class: no clash with Serializer.data
    layout = serializers.DictField(help_text="Plotly's layout (axis titles, margins, legend, height).")


class CompareChartOut(serializers.Serializer):
    key = serializers.CharField()
    series = _series()
    groups = CompareGroupStatsOut(many=True, required=False, help_text="With `group_by` only.")
    figure = PlotlyFigureOut()


@extend_schema_field({})
class ConfigValueField(serializers.JSONField):
    pass


class ConfigDiffOut(serializers.Serializer):
    key = serializers.CharField(help_text="A dotted config key.")
    values = serializers.ListField(
        child=ConfigValueField(),
        help_text=f"Each run's value, in the order of `runs`; '{MISSING}' where its config lacks the key.",
    )


class CompareGroupOut(serializers.Serializer):
    group = serializers.CharField()
    runs = serializers.ListField(child=serializers.IntegerField())


class RunCompareOut(serializers.Serializer):
    runs = CompareRunOut(many=True, help_text="In the order asked for.")
    keys = serializers.ListField(child=serializers.CharField(), help_text="Every metric key any of the runs logged.")
    key = serializers.CharField(help_text="The first chart's key.")
    series = _series()
    charts = CompareChartOut(many=True, help_text="One per `key` asked for.")
    config_diff = ConfigDiffOut(many=True, help_text="The config keys whose values differ between the runs.")
    group_by = serializers.CharField(required=False, help_text="With `group_by` only: as asked for.")
    band = serializers.ChoiceField(choices=list(BANDS), required=False, help_text="With `group_by` only.")
    groups = CompareGroupOut(many=True, required=False, help_text="With `group_by` only.")


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
        responses=RunCompareOut,
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
