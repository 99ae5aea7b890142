"""Writes for the environment catalog.

Registration probes the server before anything is stored: a server that is down, slow
or not an environment is refused with a message that says why, and no row is written.
The network calls happen outside any transaction: a slow server must not hold the
database's write lock (SQLite) while training writes telemetry.
"""

from __future__ import annotations

import os
import re
import shutil

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from webapp.catalog.models import Environment
from webapp.catalog.probe import (
    ProbeError,
    ProbeResult,
    normalise_base_url,
    probe_capacity,
    probe_environment,
)

ENV_VAR_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,99}$")
ORS_CATALOG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}/[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._/-]{0,199}(:[A-Za-z0-9._-]{1,128})?(@sha256:[0-9a-f]{64})?$")


# Metadata set at registration, not read from the server: a re-probe keeps it.
KEPT_ON_PROBE = (
    "image", "ors_catalog", "api_key_env", "capacity_source", "bundled", "catalog_entry", "catalog_snapshot",
)


class EnvironmentRejected(Exception):
    """Registration was refused; `errors` maps field names to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


def docker_available() -> bool:
    """A Docker engine this process can use: the CLI and a reachable daemon socket."""
    if shutil.which("docker") is None:
        return False
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return not host.startswith("unix://") or os.path.exists(host.removeprefix("unix://"))


def _check_fields(
    *, name: str, kind: str, base_url: str, image: str, capacity: int | None,
    ors_catalog: str, api_key_env: str,
) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if not name or len(name) > 100:
        errors["name"] = ["give a name of 1 to 100 characters"]
    elif Environment.objects.filter(name=name).exists():
        errors["name"] = [f"an environment named '{name}' already exists"]
    if kind not in ("", Environment.Kind.OPENENV, Environment.Kind.ORS, Environment.Kind.HARBOR):
        errors["kind"] = [f"unknown kind '{kind}'; use openenv or ors (or leave it empty to detect it)"]
    elif kind == Environment.Kind.HARBOR:
        errors["kind"] = [
            "Harbor tasks run black-box agents in cloud sandboxes on GPU workers; this installation "
            "has neither, so they cannot be registered here"
        ]
    if capacity is not None and not (1 <= capacity <= 100_000):
        errors["capacity"] = ["capacity must be between 1 and 100000"]
    sources = [bool(base_url), bool(image), bool(ors_catalog)]
    if sum(sources) != 1:
        errors["base_url"] = ["give exactly one of base_url, image (a container image) or ors_catalog (Org/Env)"]
    if image and not IMAGE_RE.fullmatch(image):
        errors["image"] = ["not a container image reference like 'registry/name:tag'"]
    if ors_catalog and not ORS_CATALOG_RE.fullmatch(ors_catalog):
        errors["ors_catalog"] = ["an Open Reward catalog name looks like 'Org/Env'"]
    if api_key_env:
        if not ENV_VAR_RE.fullmatch(api_key_env):
            errors["api_key_env"] = ["the name of an environment variable, like OPENREWARD_API_KEY"]
        elif api_key_env not in os.environ:
            errors["api_key_env"] = [
                f"the variable {api_key_env} is not set for the web and worker processes; set it there "
                "(the key itself is never stored)"
            ]
    if ors_catalog and not api_key_env:
        errors["api_key_env"] = ["an Open Reward catalog environment needs the name of the variable holding the API key"]
    return errors


def environment_register(
    *,
    owner: AbstractBaseUser | None,
    name: str,
    base_url: str = "",
    kind: str = "",
    capacity: int | None = None,
    measure_capacity: bool = False,
    ors_env: str = "",
    image: str = "",
    ors_catalog: str = "",
    api_key_env: str = "",
) -> Environment:
    """Probe the server first; only a server that answers as an environment is stored.

    `kind` empty means detect it (OpenEnv or Open Reward Standard). `capacity` is declared,
    or measured when `measure_capacity` (OpenEnv: sessions opened until CAPACITY_REACHED).
    """
    name = (name or "").strip()
    base_url, image, ors_catalog = (base_url or "").strip(), (image or "").strip(), (ors_catalog or "").strip()
    api_key_env = (api_key_env or "").strip()
    errors = _check_fields(
        name=name, kind=kind or "", base_url=base_url, image=image, capacity=capacity,
        ors_catalog=ors_catalog, api_key_env=api_key_env,
    )
    if base_url:
        try:
            base_url = normalise_base_url(base_url)
        except ProbeError as exc:
            errors["base_url"] = [str(exc)]
    if image and not errors and not docker_available():
        errors["image"] = [
            "no Docker engine on this machine, so the image cannot be started here: run it where Docker "
            "is (e.g. docker run -p 8000:8000 IMAGE) and register its URL instead"
        ]
    if errors:
        raise EnvironmentRejected(errors)
    metadata_extra: dict[str, object] = {}
    if image:
        base_url = _start_container(image)
        metadata_extra["image"] = image
    if ors_catalog:
        kind = Environment.Kind.ORS
        base_url = normalise_base_url(settings.ENVLAB_OPENREWARD_API_URL)
        ors_env = ors_env or ors_catalog
        metadata_extra.update({"ors_catalog": ors_catalog})
    if api_key_env:
        metadata_extra["api_key_env"] = api_key_env
    try:
        result = probe_environment(base_url, kind=kind or None, ors_env=ors_env)
    except ProbeError as exc:
        raise EnvironmentRejected({"ors_catalog" if ors_catalog else "base_url": [str(exc)]}) from None
    if not result.healthy:
        raise EnvironmentRejected({"base_url": [result.error]})
    capacity_source = "declared" if capacity is not None else ""
    if measure_capacity and capacity is None:
        if result.kind != Environment.Kind.OPENENV:
            raise EnvironmentRejected({"capacity": ["capacity can be measured on OpenEnv servers only; declare it"]})
        try:
            measured = probe_capacity(base_url)
        except ProbeError as exc:
            raise EnvironmentRejected({"capacity": [f"measuring capacity failed: {exc}"]}) from None
        capacity = measured.capacity
        capacity_source = "probed (at least)" if measured.at_least else "probed"
        if capacity < 1:
            raise EnvironmentRejected({"capacity": ["the server refused every session (CAPACITY_REACHED)"]})
    return Environment.objects.create(
        owner=owner,
        name=name,
        kind=result.kind,
        base_url=base_url,
        status=Environment.Status.HEALTHY,
        tools=result.tools,
        metadata={**result.metadata, **metadata_extra, **({"capacity_source": capacity_source} if capacity_source else {})},
        capacity=capacity,
        checked_at=timezone.now(),
    )


def _start_container(image: str) -> str:
    """Start `image` through OpenEnv's docker support and return its URL. Needs a Docker engine."""
    try:
        from openenv.core.containers.runtime import LocalDockerProvider
    except ImportError as exc:  # pragma: no cover - depends on the installed openenv
        raise EnvironmentRejected({"image": [f"openenv's docker support is not available: {exc}"]}) from None
    try:
        provider = LocalDockerProvider()
        url = str(provider.start_container(image))
        provider.wait_for_ready(url, timeout_s=60)
    except Exception as exc:  # the engine's own message says what went wrong
        raise EnvironmentRejected({"image": [f"starting {image} failed: {str(exc)[:500]}"]}) from None
    return normalise_base_url(url)


def environment_probe(*, environment: Environment) -> Environment:
    """Re-read the server and store what it says, healthy or not."""
    try:
        result: ProbeResult | None = probe_environment(
            environment.base_url, kind=environment.kind,
            ors_env=str((environment.metadata or {}).get("ors_env", "")),
        )
    except ProbeError as exc:
        result = None
        environment.status = Environment.Status.UNHEALTHY
        environment.last_error = str(exc)
    if result is not None:
        environment.status = Environment.Status.HEALTHY if result.healthy else Environment.Status.UNHEALTHY
        environment.last_error = result.error
        environment.tools = result.tools
        keep = {k: v for k, v in (environment.metadata or {}).items() if k in KEPT_ON_PROBE}
        environment.metadata = {**result.metadata, **keep}
    environment.checked_at = timezone.now()
    environment.save(update_fields=["status", "last_error", "tools", "metadata", "checked_at"])
    return environment


def environment_measure_capacity(*, environment: Environment) -> Environment:
    """Measure an OpenEnv server's capacity now and store it."""
    if environment.kind != Environment.Kind.OPENENV:
        raise EnvironmentRejected({"capacity": ["capacity can be measured on OpenEnv servers only"]})
    try:
        measured = probe_capacity(environment.base_url)
    except ProbeError as exc:
        raise EnvironmentRejected({"capacity": [f"measuring capacity failed: {exc}"]}) from None
    environment.capacity = measured.capacity
    environment.metadata = {
        **(environment.metadata or {}),
        "capacity_source": "probed (at least)" if measured.at_least else "probed",
    }
    environment.save(update_fields=["capacity", "metadata"])
    return environment


def environments_recheck(*, older_than_seconds: float = 0) -> int:
    """Re-probe every environment checked longer ago than `older_than_seconds`; returns how many."""
    cutoff = timezone.now() - timezone.timedelta(seconds=older_than_seconds)
    count = 0
    for environment in Environment.objects.all():
        if environment.checked_at is None or environment.checked_at <= cutoff:
            environment_probe(environment=environment)
            count += 1
    return count
