"""Writes for the environment catalog."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from webapp.catalog.models import Environment
from webapp.catalog.probe import ProbeError, normalise_base_url, probe_openenv


class EnvironmentRejected(Exception):
    """Registration was refused; `errors` maps field names to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


def environment_register(
    *,
    owner: AbstractBaseUser | None,
    name: str,
    base_url: str,
    kind: str = Environment.Kind.OPENENV,
    capacity: int | None = None,
) -> Environment:
    """Probe the server first; only a server that answers as an environment is stored."""
    errors: dict[str, list[str]] = {}
    name = (name or "").strip()
    if not name or len(name) > 100:
        errors["name"] = ["give a name of 1 to 100 characters"]
    elif Environment.objects.filter(name=name).exists():
        errors["name"] = [f"an environment named '{name}' already exists"]
    if kind != Environment.Kind.OPENENV:
        errors["kind"] = [f"kind '{kind}' cannot be registered yet; use 'openenv'"]
    if capacity is not None and not (1 <= capacity <= 100_000):
        errors["capacity"] = ["capacity must be between 1 and 100000"]
    try:
        base_url = normalise_base_url(base_url)
    except ProbeError as exc:
        errors["base_url"] = [str(exc)]
    if errors:
        raise EnvironmentRejected(errors)
    try:
        result = probe_openenv(base_url)
    except ProbeError as exc:
        raise EnvironmentRejected({"base_url": [str(exc)]}) from None
    if not result.healthy:
        raise EnvironmentRejected({"base_url": [result.error]})
    return Environment.objects.create(
        owner=owner,
        name=name,
        kind=kind,
        base_url=base_url,
        status=Environment.Status.HEALTHY,
        tools=result.tools,
        metadata=result.metadata,
        capacity=capacity,
        checked_at=timezone.now(),
    )


def environment_probe(*, environment: Environment) -> Environment:
    """Re-read the server and store what it says, healthy or not.

    The network calls happen outside any transaction: a slow server must not hold the
    database's write lock (SQLite) while training writes telemetry."""
    try:
        result = probe_openenv(environment.base_url)
    except ProbeError as exc:
        environment.status = Environment.Status.UNHEALTHY
        environment.last_error = str(exc)
    else:
        environment.status = (
            Environment.Status.HEALTHY if result.healthy else Environment.Status.UNHEALTHY
        )
        environment.last_error = result.error
        environment.tools = result.tools
        environment.metadata = result.metadata
    environment.checked_at = timezone.now()
    environment.save(update_fields=["status", "last_error", "tools", "metadata", "checked_at"])
    return environment
