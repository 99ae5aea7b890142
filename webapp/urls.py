from django.contrib import admin
from django.urls import include, path

from webapp.core.throttles import throttle_posts

# The admin's sign-in costs a password hash per post like the others: the same per-address rate.
admin.site.login = throttle_posts("login")(admin.site.login)  # type: ignore[method-assign]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("webapp.api.urls")),
    path("", include("webapp.core.urls")),
    path("", include("webapp.accounts.urls")),
    path("", include("webapp.catalog.urls")),
    path("", include("webapp.catalog.console_urls")),
    path("", include("webapp.runs.urls")),
    path("", include("webapp.sweeps.urls")),
    path("", include("webapp.evaluations.urls")),
    path("", include("webapp.evaluations.arena.urls")),
    path("", include("webapp.jobs.urls")),
    path("", include("webapp.rewards.urls")),
    path("", include("webapp.workbench.urls")),
]
