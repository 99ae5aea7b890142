from django.urls import path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.authtoken.views import obtain_auth_token

from webapp.api import views

urlpatterns = [
    path("auth/token/", obtain_auth_token, name="api-token"),
    path("environments/", views.EnvironmentListApi.as_view(), name="api-environments"),
    path("environments/<int:pk>/", views.EnvironmentDetailApi.as_view(), name="api-environment"),
    path("environments/<int:pk>/probe/", views.EnvironmentProbeApi.as_view(), name="api-environment-probe"),
    path("environments/<int:pk>/capacity/", views.EnvironmentCapacityApi.as_view(), name="api-environment-capacity"),
    path("runs/", views.RunListApi.as_view(), name="api-runs"),
    path("runs/<int:pk>/", views.RunDetailApi.as_view(), name="api-run"),
    path("runs/<int:pk>/cancel/", views.RunCancelApi.as_view(), name="api-run-cancel"),
    path("runs/<int:pk>/resume/", views.RunResumeApi.as_view(), name="api-run-resume"),
    path("runs/<int:pk>/metrics/", views.RunMetricsApi.as_view(), name="api-run-metrics"),
    path("runs/<int:pk>/rollouts/", views.RunRolloutsApi.as_view(), name="api-run-rollouts"),
    path("workers/", views.WorkerListApi.as_view(), name="api-workers"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
]

urlpatterns += [
    path("catalog-snapshots/", views.CatalogSnapshotListApi.as_view(), name="api-catalog-snapshots"),
    path(
        "catalog-snapshots/<int:pk>/",
        views.CatalogSnapshotDetailApi.as_view(),
        name="api-catalog-snapshot",
    ),
    path(
        "catalog-snapshots/<int:pk>/register/",
        views.CatalogEntryRegisterApi.as_view(),
        name="api-catalog-snapshot-register",
    ),
]
