from django.urls import path

from webapp.catalog import views

urlpatterns = [
    path("environments/", views.environment_list, name="environment-list"),
    path("environments/<int:pk>/", views.environment_detail, name="environment-detail"),
    path("environments/<int:pk>/probe/", views.environment_probe_view, name="environment-probe"),
    path(
        "environments/<int:pk>/measure-capacity/",
        views.environment_measure_capacity_view,
        name="environment-measure-capacity",
    ),
    path(
        "environments/bundled/<slug:key>/start/", views.bundled_start_view, name="bundled-start"
    ),
    path("environments/bundled/<slug:key>/stop/", views.bundled_stop_view, name="bundled-stop"),
]
