from django.urls import path

from webapp.evaluations import sidebyside_views, views

urlpatterns = [
    path("evaluations/", views.evaluation_list, name="evaluation-list"),
    path("evaluations/<int:pk>/", views.evaluation_detail, name="evaluation-detail"),
    path("evaluations/<int:pk>/results.csv", views.evaluation_csv, name="evaluation-csv"),
    path(
        "replay/evaluations/<int:pk>/<int:model_index>/<int:index>/",
        views.evaluation_episode_replay,
        name="evaluation-episode-replay",
    ),
    path("arena/", sidebyside_views.arena, name="arena"),
    path("arena/side-by-side/", sidebyside_views.side_by_side_view, name="arena-side-by-side"),
    path(
        "runs/<int:pk>/evaluate-checkpoints/",
        views.run_evaluate_checkpoints,
        name="run-evaluate-checkpoints",
    ),
]
