"""`GET /api/runs/<id>/rollouts/steps/`: how many rollouts each step stored, newest step
first, up to the run's current seq (the run page's transcript list sizes itself from it
after a resumed run forgot its later steps)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.runs.selectors import run_rollout_steps, runs_visible_to


class RunRolloutStepsApi(APIView):
    @extend_schema(responses=dict, description="{last_seq, steps: [[step, rollouts], ...]}, newest step first.")
    def get(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(runs_visible_to(user=request.user), pk=pk)
        # The seq is read first: every rollout counted is at or below it, later ones are live.
        last_seq = run.last_seq
        return Response({"last_seq": last_seq, "steps": run_rollout_steps(run=run, through_seq=last_seq)})
