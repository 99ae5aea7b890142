"""Evaluation lists that lower apps' pages show (the run page's checkpoint evaluations), so
that runs' views need not import evaluations, which sits above them."""

from __future__ import annotations

from django import template
from django.db.models import QuerySet

from webapp.evaluations.models import Evaluation
from webapp.evaluations.selectors import evaluations_visible_to
from webapp.runs.models import Run

register = template.Library()


@register.simple_tag(takes_context=True)
def run_checkpoint_evaluations(context: template.Context, run: Run, limit: int = 5) -> QuerySet[Evaluation]:
    """The newest evaluations of `run`'s checkpoints that the viewer may open themselves."""
    return evaluations_visible_to(user=context["request"].user).filter(source_run=run)[:limit]
