"""Workbench panels that lower apps' pages show: the environment page's learnability card
is drawn here, so catalog's view need not import the workbench that sits above it."""

from __future__ import annotations

from typing import Any

from django import template

from webapp.catalog.models import Environment
from webapp.rewards.selectors import recipes_visible_to
from webapp.workbench.learnability import learnability_cards

register = template.Library()


@register.inclusion_tag("catalog/_learnability.html", takes_context=True)
def learnability_panel(context: template.Context, environment: Environment) -> dict[str, Any]:
    """The newest learnability card per recipe for `environment`, and the form's recipes."""
    user = context["request"].user
    return {
        "environment": environment,
        "learnability_cards": learnability_cards(user=user, environment_id=environment.pk),
        "learnability_recipes": list(recipes_visible_to(user=user).order_by("name")[:200]),
        "csrf_token": context.get("csrf_token"),
        "request": context["request"],
    }
