"""A reward recipe and its immutable versions: a run records the exact version it used."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class RewardRecipe(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reward_recipes"
    )
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True, default="", max_length=2000)
    # The newest version's number (the versions' highest), kept here so a list reads one row.
    latest_version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"], name="reward_recipe_owner_name_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} (v{self.latest_version})"


class RewardRecipeVersion(models.Model):
    """Written once, never changed: services only create them."""

    recipe = models.ForeignKey(RewardRecipe, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    # Validated terms (webapp.rewards.terms.RewardTerm), as JSON with defaults left out.
    terms = models.JSONField()
    # Why this version exists when its terms did not change: envlab changed what one of them
    # means (a migration wrote it; a user's save leaves it empty).
    note = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["recipe_id", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["recipe", "number"], name="reward_recipe_version_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(number__gte=1), name="reward_recipe_version_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recipe.name} v{self.number}"
