from django.urls import path

from webapp.sweeps import views

urlpatterns = [
    path("sweeps/<int:pk>/", views.sweep_detail, name="sweep-detail"),
    path("sweeps/<int:pk>/cancel-rest/", views.sweep_cancel_rest_view, name="sweep-cancel-rest"),
]
