"""The API's shape of a background job (`GET /api/jobs/<id>/`, webapp.jobs.selectors.job_out)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from webapp.jobs.models import Job


class JobProgressOut(serializers.Serializer):
    done = serializers.IntegerField(help_text="Units of work done (episodes, rollouts, push steps).")
    total = serializers.IntegerField(help_text="Units of work in all; 0 when not known.")
    fraction = serializers.FloatField(allow_null=True, help_text="done / total to 4 places; null while total is 0.")


@extend_schema_field(serializers.DictField())
class JobResultField(serializers.JSONField):
    """A job's result as its worker function returned it (worker/play/jobs.py)."""


class JobOut(serializers.Serializer):
    """A background job that is not a training run: its state, progress and, once it
    succeeded, its result."""

    id = serializers.IntegerField()
    kind = serializers.CharField(help_text="preview, dry_run, learnability, rescore or hub_push.")
    status = serializers.ChoiceField(choices=Job.Status.choices)
    progress = JobProgressOut()
    result = JobResultField(
        allow_null=True,
        help_text="The job's answer once it succeeded, null until then and when it failed. Its fields depend on "
        "`kind`: the endpoint that started the job says them.",
    )
    error = serializers.CharField(allow_blank=True, help_text="Why it failed; empty otherwise.")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
