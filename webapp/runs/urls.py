from django.urls import path

from webapp.runs import views, worker_views
from webapp.runs.telemetry import prompt_views

urlpatterns = [
    path("", views.home, name="home"),
    path("runs/new/", views.run_new, name="run-new"),
    path("runs/demo/", views.run_demo, name="run-demo"),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run-cancel"),
    path("runs/<int:pk>/resume/", views.run_resume_view, name="run-resume"),
    path("runs/<int:pk>/prompts/", prompt_views.run_prompt_list, name="run-prompts"),
    path(
        "runs/<int:pk>/prompts/<str:key>/", prompt_views.run_prompt_timeline_view, name="run-prompt-timeline"
    ),
    path("workers/", worker_views.worker_list, name="worker-list"),
]
