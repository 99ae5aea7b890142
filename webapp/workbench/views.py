"""The composer's pages: a new recipe, or one version of yours.

A recipe is its owner's alone: anyone else gets a 404, as from the API. The composer is a
script (webapp/static/js/composer.js) over the recipes API; the page embeds what it starts from.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from webapp.core.users import signed_in_user
from webapp.rewards.models import RewardRecipe
from webapp.rewards.selectors import recipe_version, recipe_versions, recipes_visible_to
from webapp.runs.models import Run
from webapp.workbench.composer import composer_catalog
from webapp.workbench.dry_run import MAX_GROUP_SIZE, MAX_GROUPS

PREVIEW_RUNS = 50


def _composer(
    request: HttpRequest, recipe: RewardRecipe | None, number: int | None
) -> HttpResponse:
    shown: dict[str, Any] | None = None
    versions: list[Any] = []
    if recipe is not None:
        version = recipe_version(recipe=recipe, number=number)
        if version is None:
            raise Http404(f"reward recipe '{recipe.name}' has no version {number}")
        versions = list(recipe_versions(recipe=recipe))
        shown = {
            "id": recipe.pk,
            "name": recipe.name,
            "description": recipe.description,
            "version": version.number,
            "latest_version": recipe.latest_version,
            "terms": version.terms,
        }
    user = signed_in_user(request)
    runs = Run.objects.filter(owner=user).order_by("-id").values("id", "name")[:PREVIEW_RUNS]
    data: dict[str, Any] = {
        "recipe": shown,
        "catalog": composer_catalog(user=user),
        "runs": list(runs),
        "urls": {
            "validate": reverse("api-reward-recipe-validate"),
            "preview": reverse("api-reward-recipe-preview"),
            "create": reverse("api-reward-recipes"),
            "recipe": reverse("api-reward-recipe", args=[recipe.pk]) if recipe else None,
            "dry_run": reverse("api-reward-recipe-dry-run", args=[recipe.pk]) if recipe else None,
            "page": reverse("recipe-detail", args=[0]).replace("/0/", "/{id}/"),
            "job": reverse("job-detail", args=[0]).replace("/0/", "/{id}/"),
            "job_api": reverse("api-job", args=[0]).replace("/0/", "/{id}/"),
        },
        "limits": {"groups": MAX_GROUPS, "group_size": MAX_GROUP_SIZE},
    }
    return render(
        request,
        "rewards/composer.html",
        {
            "recipe": recipe,
            "shown": shown,
            "versions": versions,
            "environments": data["catalog"]["environments"],
            "composer_data": data,
            "nav": "rewards",
        },
    )


@login_required
def recipe_new(request: HttpRequest) -> HttpResponse:
    return _composer(request, None, None)


@login_required
def recipe_detail(request: HttpRequest, pk: int) -> HttpResponse:
    recipe = get_object_or_404(recipes_visible_to(user=request.user), pk=pk)
    raw = request.GET.get("version", "")
    if raw and not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= 1_000_000):
        raise Http404("a version is a whole number from 1")
    return _composer(request, recipe, int(raw) if raw else None)
