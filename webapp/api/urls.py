from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from webapp.accounts import apis as account_apis
from webapp.api import views
from webapp.jobs import apis as job_apis
from webapp.rewards import apis as reward_apis
from webapp.runs import apis as run_apis
from webapp.runs.telemetry import prompt_apis
from webapp.workbench import apis as workbench_apis

urlpatterns = [
    path("auth/token/", account_apis.TokenCreateApi.as_view(), name="api-token"),
    path("auth/tokens/", account_apis.TokenListApi.as_view(), name="api-tokens"),
    path("auth/tokens/<str:token_key>/", account_apis.TokenRevokeApi.as_view(), name="api-token-revoke"),
    # Revoke the token this request carries, or every token of its user.
    path("auth/logout/", account_apis.TokenLogoutApi.as_view(), name="api-logout"),
    path("auth/logout-all/", account_apis.TokenLogoutAllApi.as_view(), name="api-logout-all"),
    path("account/secrets/", account_apis.SecretListApi.as_view(), name="api-secrets"),
    path("account/secrets/<str:name>/", account_apis.SecretDetailApi.as_view(), name="api-secret"),
    path("account/run-layout/", views.RunChartLayoutApi.as_view(), name="api-run-layout"),
    path("environments/", views.EnvironmentListApi.as_view(), name="api-environments"),
    path("environments/<int:pk>/", views.EnvironmentDetailApi.as_view(), name="api-environment"),
    path("environments/<int:pk>/probe/", views.EnvironmentProbeApi.as_view(), name="api-environment-probe"),
    path("environments/<int:pk>/capacity/", views.EnvironmentCapacityApi.as_view(), name="api-environment-capacity"),
    path(
        "environments/<int:pk>/stop-container/",
        views.EnvironmentContainerStopApi.as_view(),
        name="api-environment-container-stop",
    ),
    path("runs/", views.RunListApi.as_view(), name="api-runs"),
    path("runs/demo/", views.RunDemoApi.as_view(), name="api-run-demo"),
    path("runs/<int:pk>/", views.RunDetailApi.as_view(), name="api-run"),
    path("runs/<int:pk>/cancel/", views.RunCancelApi.as_view(), name="api-run-cancel"),
    path("runs/<int:pk>/resume/", views.RunResumeApi.as_view(), name="api-run-resume"),
    path("runs/<int:pk>/metrics/", views.RunMetricsApi.as_view(), name="api-run-metrics"),
    path("runs/<int:pk>/metrics/keys/", views.RunMetricKeysApi.as_view(), name="api-run-metric-keys"),
    path("runs/compare/", views.RunCompareApi.as_view(), name="api-run-compare"),
    path("runs/<int:pk>/rollouts/", views.RunRolloutsApi.as_view(), name="api-run-rollouts"),
    path("runs/<int:pk>/rollouts/steps/", run_apis.RunRolloutStepsApi.as_view(), name="api-run-rollout-steps"),
    path("runs/<int:pk>/rollouts/export/", views.RunRolloutsExportApi.as_view(), name="api-run-rollouts-export"),
    path("runs/<int:pk>/tools/", views.RunToolsApi.as_view(), name="api-run-tools"),
    path("runs/<int:pk>/events/", views.RunEventsApi.as_view(), name="api-run-events"),
    path("runs/<int:pk>/prompts/", prompt_apis.RunPromptListApi.as_view(), name="api-run-prompts"),
    path("runs/<int:pk>/prompts/<str:key>/", prompt_apis.RunPromptTimelineApi.as_view(), name="api-run-prompt"),
    path("runs/<int:pk>/rescore/", workbench_apis.RunRescoreApi.as_view(), name="api-run-rescore"),
    path("workers/", views.WorkerListApi.as_view(), name="api-workers"),
    path("reward-recipes/", reward_apis.RecipeListApi.as_view(), name="api-reward-recipes"),
    path("reward-recipes/<int:pk>/", reward_apis.RecipeDetailApi.as_view(), name="api-reward-recipe"),
    path("reward-recipes/<int:pk>/dry-run/", workbench_apis.RecipeDryRunApi.as_view(), name="api-reward-recipe-dry-run"),
    path(
        "reward-recipes/<int:pk>/learnability/",
        workbench_apis.RecipeLearnabilityApi.as_view(),
        name="api-reward-recipe-learnability",
    ),
    path("reward-recipes/kinds/", workbench_apis.RecipeKindsApi.as_view(), name="api-reward-recipe-kinds"),
    path("reward-recipes/validate/", workbench_apis.RecipeValidateApi.as_view(), name="api-reward-recipe-validate"),
    path("reward-recipes/preview/", workbench_apis.RecipePreviewApi.as_view(), name="api-reward-recipe-preview"),
    path("jobs/<int:pk>/", job_apis.JobDetailApi.as_view(), name="api-job"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
]

urlpatterns += [path("", include("webapp.evaluations.api_urls"))]

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
