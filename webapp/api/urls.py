"""The API's URL table: every app owns its endpoints (<app>/apis.py); only the paths meet here."""

from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from webapp.accounts import apis as account_apis
from webapp.api.docs import redoc_bundle_view
from webapp.catalog import apis as catalog_apis
from webapp.evaluations.arena import apis as arena_apis
from webapp.jobs import apis as job_apis
from webapp.rewards import apis as reward_apis
from webapp.runs import apis as run_apis
from webapp.runs.telemetry import prompt_apis
from webapp.sweeps import apis as sweep_apis
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
    path("account/run-layout/", run_apis.RunChartLayoutApi.as_view(), name="api-run-layout"),
    path("environments/", catalog_apis.EnvironmentListApi.as_view(), name="api-environments"),
    path("environments/<int:pk>/", catalog_apis.EnvironmentDetailApi.as_view(), name="api-environment"),
    path("environments/<int:pk>/probe/", catalog_apis.EnvironmentProbeApi.as_view(), name="api-environment-probe"),
    path("environments/<int:pk>/capacity/", catalog_apis.EnvironmentCapacityApi.as_view(), name="api-environment-capacity"),
    path(
        "environments/<int:pk>/stop-container/",
        catalog_apis.EnvironmentContainerStopApi.as_view(),
        name="api-environment-container-stop",
    ),
    path("runs/", run_apis.RunListApi.as_view(), name="api-runs"),
    path("runs/demo/", run_apis.RunDemoApi.as_view(), name="api-run-demo"),
    path("runs/probe/", workbench_apis.RunProbeApi.as_view(), name="api-run-probe"),
    path("runs/external/", run_apis.RunExternalApi.as_view(), name="api-run-external"),
    path("runs/<int:pk>/log/", run_apis.RunLogApi.as_view(), name="api-run-log"),
    path("runs/<int:pk>/finish/", run_apis.RunFinishApi.as_view(), name="api-run-finish"),
    path("presets/", run_apis.PresetListApi.as_view(), name="api-presets"),
    path("runs/<int:pk>/", run_apis.RunDetailApi.as_view(), name="api-run"),
    path("runs/<int:pk>/cancel/", run_apis.RunCancelApi.as_view(), name="api-run-cancel"),
    path("runs/<int:pk>/resume/", run_apis.RunResumeApi.as_view(), name="api-run-resume"),
    path("runs/<int:pk>/metrics/", run_apis.RunMetricsApi.as_view(), name="api-run-metrics"),
    path("runs/<int:pk>/metrics/export/", run_apis.RunMetricsExportApi.as_view(), name="api-run-metrics-export"),
    path("runs/<int:pk>/metrics/keys/", run_apis.RunMetricKeysApi.as_view(), name="api-run-metric-keys"),
    path("runs/compare/", arena_apis.RunCompareApi.as_view(), name="api-run-compare"),
    path("runs/<int:pk>/rollouts/", run_apis.RunRolloutsApi.as_view(), name="api-run-rollouts"),
    path("runs/<int:pk>/rollouts/steps/", run_apis.RunRolloutStepsApi.as_view(), name="api-run-rollout-steps"),
    path("runs/<int:pk>/rollouts/export/", run_apis.RunRolloutsExportApi.as_view(), name="api-run-rollouts-export"),
    path("runs/<int:pk>/tools/", run_apis.RunToolsApi.as_view(), name="api-run-tools"),
    path("runs/<int:pk>/events/", run_apis.RunEventsApi.as_view(), name="api-run-events"),
    path("runs/<int:pk>/prompts/", prompt_apis.RunPromptListApi.as_view(), name="api-run-prompts"),
    path("runs/<int:pk>/prompts/<str:key>/", prompt_apis.RunPromptTimelineApi.as_view(), name="api-run-prompt"),
    path("runs/<int:pk>/rescore/", workbench_apis.RunRescoreApi.as_view(), name="api-run-rescore"),
    path("runs/<int:pk>/push/", workbench_apis.RunHubPushApi.as_view(), name="api-run-push"),
    path(
        "evaluations/<int:pk>/push/", workbench_apis.EvaluationHubPushApi.as_view(), name="api-evaluation-push"
    ),
    path("workers/", run_apis.WorkerListApi.as_view(), name="api-workers"),
    path("sweeps/", sweep_apis.SweepListApi.as_view(), name="api-sweeps"),
    path("sweeps/<int:pk>/", sweep_apis.SweepDetailApi.as_view(), name="api-sweep"),
    path("sweeps/<int:pk>/cancel-rest/", sweep_apis.SweepCancelRestApi.as_view(), name="api-sweep-cancel-rest"),
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
    # The schema they read is for signed-in users: a visitor is sent to the login page first.
    path(
        "docs/",
        login_required(SpectacularSwaggerView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    path(
        "redoc/",
        login_required(
            SpectacularRedocView.as_view(url_name="api-schema", template_name="api/redoc.html")
        ),
        name="api-redoc",
    ),
    path("redoc/redoc.standalone.js", redoc_bundle_view, name="api-redoc-bundle"),
]

urlpatterns += [path("", include("webapp.evaluations.api_urls"))]

urlpatterns += [
    path("catalog-snapshots/", catalog_apis.CatalogSnapshotListApi.as_view(), name="api-catalog-snapshots"),
    path(
        "catalog-snapshots/<int:pk>/",
        catalog_apis.CatalogSnapshotDetailApi.as_view(),
        name="api-catalog-snapshot",
    ),
    path(
        "catalog-snapshots/<int:pk>/register/",
        catalog_apis.CatalogEntryRegisterApi.as_view(),
        name="api-catalog-snapshot-register",
    ),
]
