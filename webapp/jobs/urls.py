from django.urls import path

from webapp.jobs import views

urlpatterns = [path("jobs/<int:pk>/", views.job_detail, name="job-detail")]
