from django.urls import path

from webapp.catalog import snapshot_views, views

urlpatterns = [
    path("environments/", views.environment_list, name="environment-list"),
    path("environments/<int:pk>/", views.environment_detail, name="environment-detail"),
    path("environments/<int:pk>/probe/", views.environment_probe_view, name="environment-probe"),
    path(
        "environments/<int:pk>/measure-capacity/",
        views.environment_measure_capacity_view,
        name="environment-measure-capacity",
    ),
    path("environments/<int:pk>/share/", views.environment_share_view, name="environment-share"),
    path(
        "environments/<int:pk>/stop-container/",
        views.environment_container_stop_view,
        name="environment-container-stop",
    ),
    path(
        "environments/bundled/<slug:key>/start/", views.bundled_start_view, name="bundled-start"
    ),
    path("environments/bundled/<slug:key>/stop/", views.bundled_stop_view, name="bundled-stop"),
    path(
        "environments/catalogs/",
        snapshot_views.catalog_snapshot_import_view,
        name="catalog-snapshot-import",
    ),
    path(
        "environments/catalogs/<int:pk>/",
        snapshot_views.catalog_snapshot_detail_view,
        name="catalog-snapshot-detail",
    ),
    path(
        "environments/catalogs/<int:pk>/register/",
        snapshot_views.catalog_entry_register_view,
        name="catalog-entry-register",
    ),
]
