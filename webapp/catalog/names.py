"""Catalog names: unique per owner, and the bundled servers' names reserved.

A name is unique within one owner's entries only (the model's UniqueConstraint), so
registering says nothing about the names other users chose: an outsider who picks a name
someone keeps private gets their own entry, not a hint (security review K5). Entries are
reached by id everywhere (run configs, the API, pages); a name is a label.

The bundled servers' names (`envs.registry.BUNDLED`: `echo`, `wordle`, ..., and `ors-<env>`
for the ORS server's environments) are reserved for their entries, which every user sees
and trains on. A user who could take one first would own what others take for the bundled
server (security review N5), so nobody registers one; only the bundled registration itself
(webapp.catalog.bundled) and the operator's `envlab_setup` use them.
"""

from __future__ import annotations

from django.contrib.auth.models import User

from envs.registry import BUNDLED
from webapp.catalog.models import Environment

# The bundled ORS server's entries are `ors-<environment>` (webapp.catalog.bundled), and which
# environments it hosts is only known once it runs: the whole prefix is reserved.
ORS_PREFIX = "ors-"
# Where a user's own entry already had a bundled name, the bundled entry is `<key>-bundled`.
BUNDLED_SUFFIX = "-bundled"


def reserved_names() -> list[str]:
    """The bundled keys, in the registry's order (plugins included)."""
    return list(BUNDLED)


def _ors_bundled() -> bool:
    return any(spec.kind == Environment.Kind.ORS for spec in BUNDLED.values())


def name_is_reserved(name: str) -> bool:
    """`name` (compared without case) is a bundled server's, or one its entries may take."""
    folded = name.strip().lower()
    keys = reserved_names()
    if folded in keys or folded.removesuffix(BUNDLED_SUFFIX) in keys:
        return True
    return _ors_bundled() and folded.startswith(ORS_PREFIX)


def reserved_name_refusal(name: str) -> str:
    """What a user who asked for a reserved name is told; "" when the name is not reserved."""
    if not name_is_reserved(name):
        return ""
    ors = f" and names starting with '{ORS_PREFIX}'" if _ors_bundled() else ""
    return (
        f"'{name}' is reserved for the bundled environments ({', '.join(reserved_names())}, "
        f"their '{BUNDLED_SUFFIX}' names{ors}, in any case): give another name"
    )


def own_names_taken(*, owner: User | None, names: list[str]) -> list[str]:
    """Which of `names` the owner's own entries already have, sorted; entries of nobody
    (owner None) are one namespace. Other users' names are never looked at."""
    entries = Environment.objects.filter(name__in=names)
    entries = entries.filter(owner__isnull=True) if owner is None else entries.filter(owner=owner)
    return sorted(entries.values_list("name", flat=True))
