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

from webapp.core.paging import PAGE_PARAMETERS, list_or_page, list_or_page_schema
from webapp.core.users import signed_in_user
from webapp.rewards.models import RewardRecipe
from webapp.rewards.selectors import recipe_version, recipe_versions, recipes_visible_to
from webapp.rewards.services import RecipeIn, recipe_create, recipe_delete, recipe_update

# The recipes list without `limit`/`offset`: at most this many, with a Link to the rest.
RECIPES_LIST_CAP = 500


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

    @extend_schema(
        operation_id="reward_recipes_list", parameters=PAGE_PARAMETERS,
        responses=list_or_page_schema(RecipeOut, "Recipe", cap=RECIPES_LIST_CAP),
    )
    def get(self, request: Request) -> Response:
        return list_or_page(
            request, recipes_visible_to(user=request.user), lambda rows: RecipeOut(rows, many=True).data,
            cap=RECIPES_LIST_CAP,
        )

    @extend_schema(request=RecipeIn, responses={201: RecipeDetailOut})
    def post(self, request: Request) -> Response:
        recipe = recipe_create(owner=signed_in_user(request), data=request.data)
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
