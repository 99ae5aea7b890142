from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("webapp.api.urls")),
    path("", include("webapp.accounts.urls")),
    path("", include("webapp.catalog.urls")),
    path("", include("webapp.catalog.console_urls")),
    path("", include("webapp.runs.urls")),
    path("", include("webapp.evaluations.urls")),
    path("", include("webapp.jobs.urls")),
    path("", include("webapp.rewards.urls")),
]
