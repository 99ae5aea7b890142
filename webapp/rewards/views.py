"""Pages: your reward recipes (the composer's pages are webapp.workbench.views)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.rewards.selectors import recipes_visible_to


@login_required
def recipe_list(request: HttpRequest) -> HttpResponse:
    recipes = recipes_visible_to(user=request.user)[:500]
    return render(request, "rewards/recipe_list.html", {"recipes": recipes, "nav": "rewards"})
