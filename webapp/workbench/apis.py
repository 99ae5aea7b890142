"""REST API for trying a recipe before training on it (shared/docs/design.md): the composer's
kinds, validate and preview, a recipe's dry run and learnability check, and a run's re-score.
Each starts a job or answers at once; thin views over webapp.workbench's services.
"""

from __future__ import annotations

from typing import Any, Literal

from django.contrib.auth.models import User
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.core.throttles import WriteThrottled
from webapp.core.users import signed_in_user
from webapp.jobs.models import Job
from webapp.rewards.models import RewardRecipe
from webapp.rewards.selectors import recipes_visible_to
from webapp.runs.models import Rollout, Run
from webapp.workbench.composer import (
    PreviewIn,
    composer_catalog,
    draft_errors,
    draft_play_create,
    draft_preview,
    preview_wants_play,
)
from webapp.workbench.dry_run import MAX_GROUPS, recipe_dry_run_create
from webapp.workbench.hub_push import hub_push_create
from webapp.workbench.learnability import recipe_learnability_create
from webapp.workbench.probe import DEFAULT_GROUPS as DEFAULT_PROBE_GROUPS
from webapp.workbench.probe import run_probe_create
from webapp.workbench.rescore import RescoreIn, run_rescore_create


def _job_queued(job: Job) -> Response:
    """202 `{id, status}`: the job a request started; followed at `GET /api/jobs/<id>/`."""
    return Response({"id": job.pk, "status": job.status}, status=status.HTTP_202_ACCEPTED)


class _RecipeJobApi(WriteThrottled, APIView):
    """`POST` on a recipe the user may see, starting `create`'s job with the request's data."""

    write_throttle_scope = "launch"  # a job each: counted as a launch (WriteThrottled)

    @staticmethod
    def create(*, owner: User, recipe: RewardRecipe, data: Any) -> Job:
        raise NotImplementedError

    @extend_schema(request=dict, responses={202: dict})
    def post(self, request: Request, pk: int) -> Response:
        recipe = get_object_or_404(recipes_visible_to(user=request.user), pk=pk)
        return _job_queued(self.create(owner=signed_in_user(request), recipe=recipe, data=request.data))


class RecipeDryRunApi(_RecipeJobApi):
    """`POST /api/reward-recipes/<id>/dry-run/` `{environment, policy, groups, group_size, seed,
    version?, prompt?, temperature?}` -> 202 `{id, status}`; follow it at `GET /api/jobs/<id>/`."""

    create = staticmethod(recipe_dry_run_create)


class RunProbeIn(serializers.Serializer):
    config = serializers.JSONField(help_text="A run config, as POST /api/runs/ takes it (it is not launched).")
    groups = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_GROUPS, default=DEFAULT_PROBE_GROUPS,
        help_text="Prompts to play, each as a group of the config's num_generations completions.",
    )


class JobQueuedOut(serializers.Serializer):
    id = serializers.IntegerField(help_text="The job: follow it at GET /api/jobs/<id>/.")
    status = serializers.CharField()


class RunProbeApi(WriteThrottled, APIView):
    """`POST /api/runs/probe/ {config, groups?}` -> 202 `{id, status}`: the learnability probe of a
    run config, a dry run of its model at its temperature and group size on its first
    environment and reward. The job's result has the dry run's report with `probe`: the pass
    rate, the expected share of zero-variance groups (p^G + (1-p)^G) and a warning past one
    half. Launching the same config then quotes the probe in its first event."""

    write_throttle_scope = "launch"  # a job each: counted as a launch (WriteThrottled)

    @extend_schema(request=RunProbeIn, responses={202: JobQueuedOut})
    def post(self, request: Request) -> Response:
        body = RunProbeIn(data=request.data)
        body.is_valid(raise_exception=True)
        job = run_probe_create(
            owner=signed_in_user(request), data=body.validated_data["config"], groups=body.validated_data["groups"]
        )
        return Response(JobQueuedOut(job).data, status=status.HTTP_202_ACCEPTED)


class KindChildrenOut(serializers.Serializer):
    min = serializers.IntegerField()
    max = serializers.IntegerField(help_text="0: a leaf, it takes no terms.")


@extend_schema_field({"type": ["string", "number", "boolean", "null"]})
class ParamDefaultField(serializers.JSONField):
    pass


class KindFieldOut(serializers.Serializer):
    """One param of a kind as the composer renders it (webapp/workbench/composer.py `_field`)."""

    name = serializers.CharField()
    control = serializers.ChoiceField(
        choices=["select", "number_or_attribute", "integer", "number", "attribute", "text"],
        help_text="The input to show: number_or_attribute takes a number or an attribute's name.",
    )
    required = serializers.BooleanField()  # type: ignore[assignment]  # DRF's metaclass takes declared fields off the class: no clash with Field.required
    nullable = serializers.BooleanField()
    default = ParamDefaultField(help_text="Its default; null when it has none (or it is null).")
    options = serializers.ListField(
        child=serializers.CharField(), allow_null=True, help_text="A select's choices; null otherwise."
    )
    minimum = serializers.FloatField(allow_null=True)
    maximum = serializers.FloatField(allow_null=True)
    max_length = serializers.IntegerField(allow_null=True)
    description = serializers.CharField(allow_blank=True)


class RecipeKindOut(serializers.Serializer):
    kind = serializers.CharField()
    description = serializers.CharField(help_text="What it scores.")
    container = serializers.BooleanField(help_text="Whether it combines child terms (its `terms`).")
    children = KindChildrenOut(help_text="How many terms a container takes.")
    schema = serializers.DictField(help_text="Its params' JSON Schema, as pydantic writes it.")
    fields = KindFieldOut(many=True, help_text="The same params as form fields.")  # type: ignore[assignment]  # DRF's metaclass takes declared fields off the class: no clash with Serializer.fields


class ComposerEnvironmentOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    key = serializers.CharField(
        allow_blank=True,
        help_text="The bundled environment kind its registration recorded (a key of `attributes`); '' for others.",
    )


class AttributeOut(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()


class ComposerCatalogOut(serializers.Serializer):
    kinds = RecipeKindOut(many=True)
    environments = ComposerEnvironmentOut(
        many=True, help_text="The caller's environments (the first 200 by name)."
    )
    attributes = serializers.DictField(
        child=AttributeOut(many=True),
        help_text="{bundled environment kind: its attributes}; '' holds those every adapter reports.",
    )


class RecipeKindsApi(APIView):
    """`GET /api/reward-recipes/kinds/` -> `{kinds: [{kind, description, container, children,
    schema, fields}], environments: [{id, name, key}], attributes: {key: [{name, description}]}}`."""

    @extend_schema(responses={200: ComposerCatalogOut})
    def get(self, request: Request) -> Response:
        return Response(composer_catalog(user=request.user))


class DraftErrorOut(serializers.Serializer):
    path = serializers.CharField(help_text="Dotted, e.g. terms.0.terms.1.params.scale; '' for the whole draft.")
    message = serializers.CharField()


class DraftCheckOut(serializers.Serializer):
    ok = serializers.BooleanField()
    errors = DraftErrorOut(many=True)  # type: ignore[assignment]  # DRF's metaclass takes declared fields off the class: no clash with Serializer.errors


class RecipeValidateApi(APIView):
    """`POST /api/reward-recipes/validate/` `{name?, description?, terms}` -> `{ok, errors:
    [{path, message}]}`: the checks a save makes, without saving. Always a 200: the answer
    is the verdict."""

    @extend_schema(request=dict, responses={200: DraftCheckOut})
    def post(self, request: Request) -> Response:
        errors = draft_errors(request.data)
        return Response({"ok": not errors, "errors": errors})


class RecipePreviewApi(APIView):
    """`POST /api/reward-recipes/preview/` `{terms, rollout: {run, seq?}}` -> `{total, values,
    tree, rollout, attributes}`: the draft scored on one stored rollout of your runs.
    `{terms, play: {environment, policy: "solver"|"random", seed?, prompt?, name?}}` instead
    -> 202 `{job: {id, status}}`: a job plays one fresh episode and scores it; its result at
    `GET /api/jobs/<id>/` is `{total, values, tree, episode, attributes, messages}`."""

    def get_throttles(self) -> list[Any]:
        # Playing an episode starts work: counted as a launch; scoring a stored one is a read.
        self.throttle_scope = "launch" if preview_wants_play(self.request.data) else None
        return super().get_throttles()

    @extend_schema(request=PreviewIn, responses={200: dict, 202: dict})
    def post(self, request: Request) -> Response:
        if preview_wants_play(request.data):
            job = draft_play_create(user=signed_in_user(request), data=request.data)
            return Response({"job": {"id": job.pk, "status": job.status}}, status=status.HTTP_202_ACCEPTED)
        try:
            return Response(draft_preview(user=signed_in_user(request), data=request.data))
        except Rollout.DoesNotExist:
            raise Http404("no such rollout in your runs") from None


class RunRescoreApi(WriteThrottled, APIView):
    """`POST /api/runs/<id>/rescore/` `{recipe, version?}` -> 202 `{id, status}`: a job scoring
    the finished run's stored rollouts with the recipe, old and new totals and advantages side
    by side (webapp/workbench/rescore.py); follow it at `GET /api/jobs/<id>/`. The caller's own
    runs and recipes only (404 / 400 otherwise); a run still queued or running is a 409."""

    write_throttle_scope = "launch"  # a job each: counted as a launch (WriteThrottled)

    @extend_schema(request=RescoreIn, responses={202: dict})
    def post(self, request: Request, pk: int) -> Response:
        user = signed_in_user(request)
        run = get_object_or_404(Run.objects.filter(owner=user), pk=pk)
        job = run_rescore_create(owner=user, run=run, data=request.data)
        return _job_queued(job)


class RecipeLearnabilityApi(_RecipeJobApi):
    """`POST /api/reward-recipes/<id>/learnability/` `{environment, episodes (1-64, default 16),
    seed, version?, prompt?}` -> 202 `{id, status}`: a job that plays the same seeded rows with
    the environment's solver and with the random policy and grades the recipe (reachability,
    random stays low, separation, headroom); follow it at `GET /api/jobs/<id>/`."""

    create = staticmethod(recipe_learnability_create)


class _HubPushApi(WriteThrottled, APIView):
    write_throttle_scope = "launch"  # a job each: counted as a launch (WriteThrottled)
    what: Literal["run", "evaluation"] = "run"

    @extend_schema(request=inline_serializer("HubPushIn", {
        "repo_id": serializers.CharField(help_text='The dataset repository, "namespace/name".'),
        "private": serializers.BooleanField(required=False, default=True),
    }), responses={202: JobQueuedOut})
    def post(self, request: Request, pk: int) -> Response:
        job = hub_push_create(user=signed_in_user(request), what=self.what, target_id=pk, data=request.data)
        return _job_queued(job)


class RunHubPushApi(_HubPushApi):
    """`POST /api/runs/<id>/push/` `{repo_id, private?}` -> 202 `{id, status}`: a job uploading the
    run's rollouts as a Parquet dataset to the Hub with the caller's stored `hf_token`
    (webapp/workbench/hub_push.py); follow it at `GET /api/jobs/<id>/`."""

    what = "run"


class EvaluationHubPushApi(_HubPushApi):
    """`POST /api/evaluations/<id>/push/` `{repo_id, private?}` -> 202 `{id, status}`: the same for
    an evaluation's episodes."""

    what = "evaluation"
