"""The run page's link to its sweep, so that runs' views need not import sweeps, which sits above them."""

from __future__ import annotations

from django import template

from webapp.runs.models import Run
from webapp.sweeps.models import SweepMember
from webapp.sweeps.selectors import sweeps_visible_to

register = template.Library()


@register.simple_tag(takes_context=True)
def run_sweep_member(context: template.Context, run: Run) -> SweepMember | None:
    """The run's place in its sweep, where the viewer may open that sweep; None otherwise."""
    member = SweepMember.objects.filter(run=run).select_related("sweep").first()
    if member is None or not sweeps_visible_to(user=context["request"].user).filter(pk=member.sweep_id).exists():
        return None
    return member
