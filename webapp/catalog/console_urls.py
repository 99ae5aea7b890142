from django.urls import path

from webapp.catalog import console_views

urlpatterns = [
    path(
        "environments/<int:pk>/console/",
        console_views.environment_console,
        name="environment-console",
    ),
]
