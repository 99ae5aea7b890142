from django.urls import path

from webapp.evaluations.arena import compare_views, replay, sidebyside_views

urlpatterns = [
    path("runs/compare/", compare_views.run_compare, name="run-compare"),
    path(
        "runs/<int:pk>/rollouts/<int:seq>/replay/",
        replay.rollout_replay_redirect,
        name="rollout-replay-redirect",
    ),
    path("replay/runs/<int:pk>/<int:seq>/", replay.rollout_replay_view, name="rollout-replay"),
    path("arena/", sidebyside_views.arena, name="arena"),
    path("arena/side-by-side/", sidebyside_views.side_by_side_view, name="arena-side-by-side"),
]
