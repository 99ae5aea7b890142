"""`GET /api/jobs/<id>/`: a background job's status, progress and result."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.jobs.selectors import job_out, jobs_visible_to
from webapp.jobs.serializers import JobOut


class JobDetailApi(APIView):
    @extend_schema(responses=JobOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(job_out(get_object_or_404(jobs_visible_to(user=request.user), pk=pk)))
