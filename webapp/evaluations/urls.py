from django.urls import path

from webapp.evaluations import views

urlpatterns = [
    path("evaluations/", views.evaluation_list, name="evaluation-list"),
    path("evaluations/<int:pk>/", views.evaluation_detail, name="evaluation-detail"),
    path("evaluations/<int:pk>/results.csv", views.evaluation_csv, name="evaluation-csv"),
    path(
        "replay/evaluations/<int:pk>/<int:model_index>/<int:index>/",
        views.evaluation_episode_replay,
        name="evaluation-episode-replay",
    ),
    path(
        "runs/<int:pk>/evaluate-checkpoints/",
        views.run_evaluate_checkpoints,
        name="run-evaluate-checkpoints",
    ),
]
