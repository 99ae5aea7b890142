"""REST API for reward recipes (shared/docs/design.md): thin views over services and selectors.

`GET|POST /api/reward-recipes/`, `GET|PUT|DELETE /api/reward-recipes/<id>/`. A recipe is
its owner's alone: anyone else gets a 404, as if it did not exist. `GET` of one recipe
shows its latest version, or `?version=<n>`.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.core.throttles import WriteThrottled
from webapp.rewards.composer import (
    PreviewIn,
    composer_catalog,
    draft_errors,
    draft_play_create,
    draft_preview,
    preview_wants_play,
)
from webapp.rewards.dry_run import recipe_dry_run_create
from webapp.rewards.learnability import recipe_learnability_create
from webapp.rewards.models import RewardRecipe
from webapp.rewards.rescore import RescoreIn, run_rescore_create
from webapp.rewards.selectors import recipe_version, recipe_versions, recipes_visible_to
from webapp.rewards.services import RecipeIn, recipe_create, recipe_delete, recipe_update
from webapp.runs.models import Rollout


class RecipeVersionOut(serializers.Serializer):
    number = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    note = serializers.CharField(help_text="Why envlab made this version without a change of terms; usually empty.")


class RecipeOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    latest_version = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class RecipeDetailOut(RecipeOut):
    version = serializers.IntegerField(help_text="The version shown: the latest, or ?version=<n>.")
    terms = serializers.ListField(child=serializers.DictField())
    versions = RecipeVersionOut(many=True)


def _detail(recipe: RewardRecipe, number: int | None = None) -> dict[str, Any]:
    version = recipe_version(recipe=recipe, number=number)
    if version is None:
        raise Http404(f"reward recipe '{recipe.name}' has no version {number}")
    return RecipeDetailOut(
        {
            "id": recipe.pk,
            "name": recipe.name,
            "description": recipe.description,
            "latest_version": recipe.latest_version,
            "created_at": recipe.created_at,
            "updated_at": recipe.updated_at,
            "version": version.number,
            "terms": version.terms,
            "versions": list(recipe_versions(recipe=recipe)),
        }
    ).data


def _version_param(request: Request) -> int | None:
    raw = request.query_params.get("version")
    if raw in (None, ""):
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= 1_000_000:
        raise ValidationError({"version": ["a version is a whole number from 1"]})
    return int(raw)


class RecipeListApi(APIView):
    # Writes are cheap rows: the user rate applies (settings REST_FRAMEWORK), no scoped one.

    @extend_schema(responses=RecipeOut(many=True))
    def get(self, request: Request) -> Response:
        recipes = recipes_visible_to(user=request.user)[:500]
        return Response(RecipeOut(recipes, many=True).data)

    @extend_schema(request=RecipeIn, responses={201: RecipeDetailOut})
    def post(self, request: Request) -> Response:
        recipe = recipe_create(owner=request.user, data=request.data)
        return Response(_detail(recipe), status=status.HTTP_201_CREATED)


class RecipeDetailApi(APIView):
    def _recipe(self, request: Request, pk: int) -> RewardRecipe:
        return get_object_or_404(recipes_visible_to(user=request.user), pk=pk)

    @extend_schema(parameters=[OpenApiParameter("version", int)], responses=RecipeDetailOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(_detail(self._recipe(request, pk), _version_param(request)))

    @extend_schema(request=RecipeIn, responses=RecipeDetailOut)
    def put(self, request: Request, pk: int) -> Response:
        recipe = recipe_update(recipe=self._recipe(request, pk), data=request.data)
        return Response(_detail(recipe))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        recipe_delete(recipe=self._recipe(request, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class RecipeDryRunApi(WriteThrottled, APIView):
    """`POST /api/reward-recipes/<id>/dry-run/` `{environment, policy, groups, group_size, seed,
    version?, prompt?, temperature?}` -> 202 `{id, status}`; follow it at `GET /api/jobs/<id>/`."""

    write_throttle_scope = "launch"  # a job each: counted as a launch (WriteThrottled)

    @extend_schema(request=dict, responses={202: dict})
    def post(self, request: Request, pk: int) -> Response:
        recipe = get_object_or_404(recipes_visible_to(user=request.user), pk=pk)
        job = recipe_dry_run_create(owner=request.user, recipe=recipe, data=request.data)
        return Response({"id": job.pk, "status": job.status}, status=status.HTTP_202_ACCEPTED)


# --- the composer page's endpoints (webapp.rewards.composer) -------------------------------------


class RecipeKindsApi(APIView):
    """`GET /api/reward-recipes/kinds/` -> `{kinds: [{kind, description, container, children,
    schema, fields}], environments: [{id, name, key}], attributes: {key: [{name, description}]}}`."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response(composer_catalog(user=request.user))


class DraftErrorOut(serializers.Serializer):
    path = serializers.CharField(help_text="Dotted, e.g. terms.0.terms.1.params.scale; '' for the whole draft.")
    message = serializers.CharField()


class DraftCheckOut(serializers.Serializer):
    ok = serializers.BooleanField()
    errors = DraftErrorOut(many=True)


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
            job = draft_play_create(user=request.user, data=request.data)
            return Response({"job": {"id": job.pk, "status": job.status}}, status=status.HTTP_202_ACCEPTED)
        try:
            return Response(draft_preview(user=request.user, data=request.data))
        except Rollout.DoesNotExist:
            raise Http404("no such rollout in your runs") from None


class RunRescoreApi(WriteThrottled, APIView):
    """`POST /api/runs/<id>/rescore/` `{recipe, version?}` -> 202 `{id, status}`: a job scoring
    the finished run's stored rollouts with the recipe, old and new totals and advantages side
    by side (webapp/rewards/rescore.py); follow it at `GET /api/jobs/<id>/`. The caller's own
    runs and recipes only (404 / 400 otherwise); a run still queued or running is a 409."""

    write_throttle_scope = "launch"  # a job each: counted as a launch (WriteThrottled)

    @extend_schema(request=RescoreIn, responses={202: dict})
    def post(self, request: Request, pk: int) -> Response:
        from webapp.runs.models import Run

        run = get_object_or_404(Run.objects.filter(owner=request.user), pk=pk)
        job = run_rescore_create(owner=request.user, run=run, data=request.data)
        return Response({"id": job.pk, "status": job.status}, status=status.HTTP_202_ACCEPTED)


class RecipeLearnabilityApi(WriteThrottled, APIView):
    """`POST /api/reward-recipes/<id>/learnability/` `{environment, episodes (1-64, default 16),
    seed, version?, prompt?}` -> 202 `{id, status}`: a job that plays the same seeded rows with
    the environment's solver and with the random policy and grades the recipe (reachability,
    random stays low, separation, headroom); follow it at `GET /api/jobs/<id>/`."""

    write_throttle_scope = "launch"  # a job each: counted as a launch (WriteThrottled)

    @extend_schema(request=dict, responses={202: dict})
    def post(self, request: Request, pk: int) -> Response:
        recipe = get_object_or_404(recipes_visible_to(user=request.user), pk=pk)
        job = recipe_learnability_create(owner=request.user, recipe=recipe, data=request.data)
        return Response({"id": job.pk, "status": job.status}, status=status.HTTP_202_ACCEPTED)
