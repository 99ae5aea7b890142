from django.contrib import admin
from django.urls import include, path

from webapp.core.throttles import throttle_posts

# The admin's sign-in costs a password hash per post like the others: the same per-address rate.
admin.site.login = throttle_posts("login")(admin.site.login)  # type: ignore[method-assign]

# The pages' URL tables, each at the root, tried in this order.
PAGE_URLS = (
    "webapp.core.urls",
    "webapp.accounts.urls",
    "webapp.catalog.urls",
    "webapp.catalog.console_urls",
    "webapp.runs.urls",
    "webapp.sweeps.urls",
    "webapp.evaluations.urls",
    "webapp.evaluations.arena.urls",
    "webapp.jobs.urls",
    "webapp.rewards.urls",
    "webapp.workbench.urls",
)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("webapp.api.urls")),
    *(path("", include(module)) for module in PAGE_URLS),
]
