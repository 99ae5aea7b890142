"""Reads for the catalog: who sees which environment, and who may act on it.

Three levels, checked in this order by every page, API endpoint and socket:
- visible: the owner's own entries, shared entries, and every entry for a user with the
  permission `catalog.view_environment` (or `change_environment`). Anything else is a
  404, so an outsider cannot tell an entry exists.
- controllable (probe, measure capacity, open the console, share or unshare, stop its
  container): the owner, or a user with `catalog.change_environment`. Visible but not
  controllable is a 403 that says who may.
- bundled servers (start, stop): `catalog.change_bundledserver` only; they are shared by
  everyone's runs.

Permissions, not `is_staff`: staff status opens the admin, the permissions say what
staff may do there and here. Superusers hold every permission.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from webapp.catalog.models import Environment
from webapp.core.users import is_signed_in, owner_or_permitted

VIEW_ALL = "catalog.view_environment"
CHANGE_ALL = "catalog.change_environment"
RUN_CONTAINER = "catalog.run_container"
CHANGE_BUNDLED = "catalog.change_bundledserver"


def environments_visible_to(*, user: Any) -> QuerySet[Environment]:
    environments = Environment.objects.select_related("owner")
    if not is_signed_in(user):
        return environments.none()
    if user.has_perm(VIEW_ALL) or user.has_perm(CHANGE_ALL):
        return environments
    return environments.filter(Q(owner=user) | Q(shared=True))


def environment_can_control(*, user: Any, environment: Environment) -> bool:
    return owner_or_permitted(user=user, owner_id=environment.owner_id, change=CHANGE_ALL)


def environment_for(*, user: Any, pk: int, control: bool = False) -> Environment:
    """The environment `pk` as `user` may reach it: Http404 when they cannot see it, and with
    `control`, PermissionDenied (saying who may) when they see it but may not act on it.
    Pages, the API (DRF turns both into its own 404 and 403) and sockets share this."""
    from django.core.exceptions import PermissionDenied
    from django.shortcuts import get_object_or_404

    environment = get_object_or_404(environments_visible_to(user=user), pk=pk)
    if control and not environment_can_control(user=user, environment=environment):
        raise PermissionDenied(environment_control_refusal(environment=environment))
    return environment


def environment_control_refusal(*, environment: Environment) -> str:
    """What a user who sees an environment but may not act on it is told."""
    whose = f"'{environment.owner.get_username()}'" if environment.owner else "nobody"
    return (
        f"'{environment.name}' is owned by {whose}: only its owner, or a user with the "
        f"permission {CHANGE_ALL}, may probe it, measure it, open its console or change it"
    )


def bundled_can_control(*, user: Any) -> bool:
    return is_signed_in(user) and user.has_perm(CHANGE_BUNDLED)


BUNDLED_REFUSAL = (
    "starting and stopping bundled servers needs the permission "
    f"{CHANGE_BUNDLED}: every user's runs depend on them"
)


# Run.ACTIVE's values (a test holds them equal), read through the reverse relation: catalog
# sits below runs and may not import its models.
ACTIVE_RUN_STATUSES = ("queued", "running")


def environment_active_runs(*, environment: Environment) -> list[int]:
    """Ids of the queued or running runs that use `environment` (their sessions count)."""
    return list(
        environment.runs.filter(status__in=ACTIVE_RUN_STATUSES)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
