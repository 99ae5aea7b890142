"""A job's page: progress while it runs; for a reward dry run, the verdict and histograms."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from webapp.core.plotly import plotly_url
from webapp.jobs.selectors import job_out, jobs_visible_to


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(jobs_visible_to(user=request.user), pk=pk)
    return render(request, "jobs/job_detail.html", {
        "job": job,
        "job_json": job_out(job),
        "api_url": reverse("api-job", args=[job.pk]),
        "plotly_url": plotly_url(),
    })
