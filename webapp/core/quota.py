"""One per-user quota over everything that takes a worker (security review N4): runs,
evaluations and background jobs (reward dry runs, learnability, re-scores, previews), queued or
running, count against ENVLAB_MAX_ACTIVE_WORK together. Runs also keep their own
ENVLAB_MAX_ACTIVE_RUNS.

Every kind of leased work is a subclass of `LeasedWork` with an `owner`: they are found in the
app registry, so this module, below every app, counts them without importing them.
"""

from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from webapp.core.errors import InvalidInput
from webapp.core.models import LeasedWork


class WorkQuotaExceeded(InvalidInput):
    """The owner already has as much queued and running work as one account may."""


def lock_owner(owner: User) -> None:
    """Serialise one owner's launches (in the caller's transaction), so two at once cannot
    both pass a quota."""
    list(get_user_model().objects.select_for_update().filter(pk=owner.pk).values_list("pk"))


def active_work(owner: User) -> dict[str, int]:
    """Queued and running work of `owner`, by kind ("runs", "evaluations", "jobs")."""
    counts: dict[str, int] = {}
    for model in apps.get_models():
        if issubclass(model, LeasedWork) and any(f.name == "owner" for f in model._meta.fields):
            rows = model.objects.filter(owner=owner, status__in=model.ACTIVE)  # type: ignore[attr-defined]
            if any(f.name == "external" for f in model._meta.fields):
                rows = rows.filter(external=False)  # trained elsewhere (an external run): takes no worker
            count = rows.count()
            if count:
                counts[str(model._meta.verbose_name_plural)] = count
    return counts


def work_quota_check(owner: User) -> None:
    """Raise WorkQuotaExceeded when `owner` may not queue one more piece of work. Call it in
    the transaction that creates the work, after `lock_owner`."""
    limit = int(settings.ENVLAB_MAX_ACTIVE_WORK)
    counts = active_work(owner)
    total = sum(counts.values())
    if total < limit:
        return
    held = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    raise WorkQuotaExceeded({"non_field_errors": [
        f"you have {total} queued or running ({held}), and one account may have at most {limit} "
        "at once (ENVLAB_MAX_ACTIVE_WORK: runs, evaluations and background jobs together): wait "
        "for one to finish, or cancel one"
    ]})
