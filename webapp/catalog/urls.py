from django.urls import path

from webapp.catalog import views

urlpatterns = [
    path("environments/", views.environment_list, name="environment-list"),
    path("environments/<int:pk>/", views.environment_detail, name="environment-detail"),
    path("environments/<int:pk>/probe/", views.environment_probe_view, name="environment-probe"),
]
