"""Included from webapp/api/urls.py under /api/."""

from django.urls import path

from webapp.evaluations import apis

urlpatterns = [
    path("evaluations/", apis.EvaluationListApi.as_view(), name="api-evaluations"),
    path("evaluations/<int:pk>/", apis.EvaluationDetailApi.as_view(), name="api-evaluation"),
    path(
        "evaluations/<int:pk>/cancel/",
        apis.EvaluationCancelApi.as_view(),
        name="api-evaluation-cancel",
    ),
    path(
        "evaluations/<int:pk>/episodes/",
        apis.EvaluationEpisodesApi.as_view(),
        name="api-evaluation-episodes",
    ),
    path(
        "evaluations/<int:pk>/episodes/export/",
        apis.EvaluationEpisodesExportApi.as_view(),
        name="api-evaluation-episodes-export",
    ),
    path(
        "evaluations/<int:pk>/results.csv",
        apis.EvaluationCsvApi.as_view(),
        name="api-evaluation-csv",
    ),
    path(
        "runs/<int:pk>/evaluate-checkpoints/",
        apis.RunEvaluateCheckpointsApi.as_view(),
        name="api-run-evaluate-checkpoints",
    ),
]
