"""Writes for reward recipes: create, update (a new immutable version), delete.

Input is validated whole before anything is written: a rejected request changes no row.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from webapp.core.errors import InvalidInput
from webapp.core.textcheck import json_object_errors
from webapp.rewards.models import RewardRecipe, RewardRecipeVersion
from webapp.rewards.terms import MAX_TREE_TERMS, RewardTerm, TermFieldError, terms_dump, terms_error


class RecipeRejected(InvalidInput):
    """A recipe was refused; `errors` maps dotted field paths to messages (a 400 in the API,
    through the one exception handler, like a refused run config)."""


class RecipeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=120)
    description: str = Field(default="", max_length=2000)
    terms: list[RewardTerm] = Field(min_length=1, max_length=MAX_TREE_TERMS)

    @field_validator("name")
    @classmethod
    def _name_stripped(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("give the recipe a name")
        return value


def recipe_parse(data: Any) -> RecipeIn:
    """Validate raw input into a recipe, or raise RecipeRejected naming each field to fix."""
    if refused := json_object_errors(data):
        raise RecipeRejected(refused)
    try:
        recipe = RecipeIn.model_validate(data)
    except ValidationError as exc:
        errors: dict[str, list[str]] = {}
        for error in exc.errors():
            prefix = ".".join(str(p) for p in error["loc"])
            ctx_error = (error.get("ctx") or {}).get("error")
            if isinstance(ctx_error, TermFieldError):
                key = f"{prefix}.{ctx_error.field}" if prefix else ctx_error.field
                errors.setdefault(key, []).append(ctx_error.message)
                continue
            errors.setdefault(prefix or "non_field_errors", []).append(
                error["msg"].removeprefix("Value error, ")
            )
        raise RecipeRejected(errors) from None
    broken = terms_error(recipe.terms)
    if broken is not None:
        raise RecipeRejected({f"terms.{broken[0]}".rstrip("."): [broken[1]]})
    return recipe


def _name_taken(owner: User, name: str) -> RecipeRejected:
    return RecipeRejected({"name": [f"you already have a recipe named '{name}'"]})


@transaction.atomic
def recipe_create(*, owner: User, data: Any) -> RewardRecipe:
    recipe_in = recipe_parse(data)
    if RewardRecipe.objects.filter(owner=owner, name=recipe_in.name).exists():
        raise _name_taken(owner, recipe_in.name)
    try:
        with transaction.atomic():  # a concurrent create of the same name loses here
            recipe = RewardRecipe.objects.create(
                owner=owner,
                name=recipe_in.name,
                description=recipe_in.description,
                latest_version=1,
            )
    except IntegrityError:
        raise _name_taken(owner, recipe_in.name) from None
    RewardRecipeVersion.objects.create(recipe=recipe, number=1, terms=terms_dump(recipe_in.terms))
    return recipe


@transaction.atomic
def recipe_update(*, recipe: RewardRecipe, data: Any) -> RewardRecipe:
    """Replace the recipe's name, description and terms. Changed terms make a new version
    (the old ones stay as they were: runs name them); the same terms make none."""
    recipe_in = recipe_parse(data)
    locked = RewardRecipe.objects.select_for_update().get(pk=recipe.pk)
    if (
        recipe_in.name != locked.name
        and RewardRecipe.objects.filter(owner_id=locked.owner_id, name=recipe_in.name).exists()
    ):
        raise _name_taken(locked.owner, recipe_in.name)
    terms = terms_dump(recipe_in.terms)
    latest = locked.versions.filter(number=locked.latest_version).first()
    if latest is None or latest.terms != terms:
        number = (locked.versions.aggregate(top=Max("number"))["top"] or 0) + 1
        RewardRecipeVersion.objects.create(recipe=locked, number=number, terms=terms)
        locked.latest_version = number
    locked.name = recipe_in.name
    locked.description = recipe_in.description
    try:
        with transaction.atomic():
            locked.save(update_fields=["name", "description", "latest_version", "updated_at"])
    except IntegrityError:
        raise _name_taken(locked.owner, recipe_in.name) from None
    return locked


@transaction.atomic
def recipe_delete(*, recipe: RewardRecipe) -> None:
    """Runs that used it keep their copy: a launched run records the version's terms."""
    RewardRecipe.objects.filter(pk=recipe.pk).delete()
