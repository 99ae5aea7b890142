"""Reads for reward recipes. A recipe is its owner's alone: anyone else gets a 404."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet
from pydantic import ValidationError

from webapp.core.users import is_signed_in
from webapp.rewards.models import RewardRecipe, RewardRecipeVersion
from webapp.rewards.terms import RecipeRef, RewardTerm, terms_error


def recipes_visible_to(*, user: User | AnonymousUser) -> QuerySet[RewardRecipe]:
    recipes = RewardRecipe.objects.select_related("owner")
    if not is_signed_in(user):
        return recipes.none()
    return recipes.filter(owner=user)


def recipe_for(*, user: User | AnonymousUser, recipe_id: int) -> RewardRecipe | None:
    return recipes_visible_to(user=user).filter(pk=recipe_id).first()


def recipe_version(
    *, recipe: RewardRecipe, number: int | None = None
) -> RewardRecipeVersion | None:
    """One version of `recipe`: `number`, or the latest."""
    return recipe.versions.filter(
        number=recipe.latest_version if number is None else number
    ).first()


def recipe_versions(*, recipe: RewardRecipe) -> QuerySet[RewardRecipeVersion]:
    return recipe.versions.order_by("number")


class RecipeRefError(ValueError):
    """A run config's `{"recipe": <id>}` names no usable recipe version."""


def recipe_resolve(
    *, ref: RecipeRef, user: User | AnonymousUser, env_names: list[str]
) -> RecipeRef:
    """`ref` pinned to one version of one of `user`'s recipes, with that version's terms:
    what a launched run records and trains with. Raises RecipeRefError saying what is wrong."""
    recipe = recipe_for(user=user, recipe_id=ref.recipe)
    if recipe is None:  # the same message for a recipe that exists but is someone else's
        raise RecipeRefError(f"no reward recipe with id {ref.recipe}")
    version = recipe_version(recipe=recipe, number=ref.version)
    if version is None:
        raise RecipeRefError(f"reward recipe '{recipe.name}' has no version {ref.version}")
    try:
        terms = [RewardTerm.model_validate(term) for term in version.terms]
    except ValidationError as exc:  # stored before a rule tightened
        raise RecipeRefError(
            f"reward recipe '{recipe.name}' v{version.number} no longer validates: {exc.errors()[0]['msg']}"
        ) from None
    broken = terms_error(terms, env_names=env_names)
    if broken is not None:
        raise RecipeRefError(f"reward recipe '{recipe.name}' v{version.number}: {broken[1]}")
    return RecipeRef(recipe=recipe.pk, version=version.number, terms=terms)
