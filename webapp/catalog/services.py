"""Writes for the environment catalog.

Registration probes the server before anything is stored: a server that is down, slow
or not an environment is refused with a message that says why, and no row is written.
The network calls happen outside any transaction: a slow server must not hold the
database's write lock (SQLite) while training writes telemetry.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ParamSpec, TypedDict, TypeVar, Unpack

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from webapp.accounts.secrets import user_secret_status
from webapp.catalog.capacity import (
    CAPACITY_AT_LEAST,
    CAPACITY_DECLARED,
    CAPACITY_LEARNED,
    CAPACITY_PROBED,
)
from webapp.catalog.kinds import (
    KINDS,
    environment_kind,
    kind_names,
    probe_environment,
    probe_environments,
)
from webapp.catalog.models import Environment
from webapp.catalog.names import name_is_reserved, own_names_taken, reserved_name_refusal
from webapp.catalog.probe import (
    CapacityResult,
    ProbeError,
    ProbeResult,
    normalise_base_url,
    probe_capacity,
)
from webapp.catalog.selectors import RUN_CONTAINER, environment_active_runs
from webapp.catalog.signals import environment_unshared
from webapp.core.errors import InvalidInput

ORS_CATALOG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}/[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._/-]{0,199}(:[A-Za-z0-9._-]{1,128})?(@sha256:[0-9a-f]{64})?$")


# Metadata set at registration, not read from the server: a re-probe keeps it.
KEPT_ON_PROBE = (
    "image", "ors_catalog", "api_key_env", "capacity_source", "capacity_stopped_by", "capacity_learned",
    "bundled", "catalog_entry", "catalog_snapshot",
)


def _measured_metadata(metadata: dict[str, Any], measured: CapacityResult) -> dict[str, Any]:
    """A row's metadata once its capacity was measured: what an earlier refusal taught is replaced."""
    kept = {k: v for k, v in metadata.items() if k not in ("capacity_stopped_by", "capacity_learned")}
    if not measured.at_least:
        return {**kept, "capacity_source": CAPACITY_PROBED}
    return {**kept, "capacity_source": CAPACITY_AT_LEAST, "capacity_stopped_by": measured.stopped_by}


def _capacity_measurable(kind: str) -> bool:
    found = environment_kind(kind)
    return found is not None and found.capacity_measurable


def _measurable_refusal() -> str:
    labels = [kind.label for kind in KINDS.values() if kind.capacity_measurable]
    return f"capacity can be measured on {' and '.join(labels)} servers only"


class EnvironmentRejected(InvalidInput):
    """Registration was refused; `errors` maps field names to messages."""


def _has_openreward_key(owner: User | None) -> bool:

    return owner is not None and user_secret_status(user=owner, name="openreward_api_key").is_set


def docker_available() -> bool:
    """A Docker engine this process can use: the CLI and a reachable daemon socket."""
    if shutil.which("docker") is None:
        return False
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return not host.startswith("unix://") or os.path.exists(host.removeprefix("unix://"))


# --- containers (image registrations) -----------------------------------------------------------
# An image runs on this host's Docker engine with the engine's defaults, so registering one
# needs the permission catalog.run_container and an image from ENVLAB_IMAGE_REGISTRIES. The
# container's id is stored on the entry; a registration refused after the container started
# stops it again, and `environment_container_stop` stops it later.

CONTAINER_ID_RE = re.compile(r"^[0-9a-f]{12,64}$")
DOCKER_TIMEOUT_S = 30.0

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class RunningContainer:
    url: str
    container_id: str
    provider: Any  # openenv's LocalDockerProvider, which holds the container it started

    def stop(self) -> None:
        try:
            self.provider.stop_container()
        except Exception:  # the refusal being raised says more than a failed clean-up
            pass


# Containers started by the registration in progress (this thread or task only).
_started_containers: ContextVar[list[RunningContainer] | None] = ContextVar(
    "envlab_started_containers", default=None
)


def _stop_containers_on_failure(register: Callable[P, R]) -> Callable[P, R]:
    """Whatever refuses a registration after its container started (a failed probe, a taken
    name, a capacity refusal) also stops that container: nothing is left running unrecorded."""

    @functools.wraps(register)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        started: list[RunningContainer] = []
        token = _started_containers.set(started)
        try:
            return register(*args, **kwargs)
        except BaseException:
            for container in started:
                container.stop()
            raise
        finally:
            _started_containers.reset(token)

    return wrapper


def _registry_allows(prefix: str, image: str) -> bool:
    # "ghcr.io/org" allows "ghcr.io/org/x" and "ghcr.io/org:tag", not "ghcr.io/org-evil/x";
    # a prefix that ends in a separator is matched as it is.
    if prefix.endswith(("/", ":", "@")):
        return image.startswith(prefix)
    return image == prefix or (image.startswith(prefix) and image[len(prefix)] in "/:@")


def _image_refusal(*, owner: User | None, image: str) -> str:
    if owner is None or not owner.has_perm(RUN_CONTAINER):
        return (
            f"registering a container image needs the permission {RUN_CONTAINER} (it runs on this "
            "host's Docker engine): ask an administrator, or register the URL of a running server"
        )
    registries = list(getattr(settings, "ENVLAB_IMAGE_REGISTRIES", []))
    if not registries:
        return (
            "no container registry is allowed on this installation: an administrator lists the "
            "allowed ones in the setting ENVLAB_IMAGE_REGISTRIES (prefixes like ghcr.io/meta-pytorch/)"
        )
    if not any(_registry_allows(prefix, image) for prefix in registries):
        return (
            f"'{image}' is not from an allowed registry; ENVLAB_IMAGE_REGISTRIES allows "
            f"{', '.join(registries)} (write the image's full name, registry included)"
        )
    return ""


def _docker_provider() -> Any:
    from openenv.core.containers.runtime import LocalDockerProvider

    return LocalDockerProvider()


def _start_container(image: str) -> RunningContainer:
    """Start `image` through OpenEnv's docker support. Needs a Docker engine."""
    try:
        provider = _docker_provider()
    except ImportError as exc:  # pragma: no cover - depends on the installed openenv
        raise EnvironmentRejected({"image": [f"openenv's docker support is not available: {exc}"]}) from None
    except Exception as exc:  # no engine after all
        raise EnvironmentRejected({"image": [f"starting {image} failed: {str(exc)[:500]}"]}) from None
    try:
        url = str(provider.start_container(image))
    except Exception as exc:  # the engine's own message says what went wrong
        raise EnvironmentRejected({"image": [f"starting {image} failed: {str(exc)[:500]}"]}) from None
    # openenv's LocalDockerProvider keeps the id `docker run -d` printed in `_container_id`
    # (it has no public accessor); without it the container could not be stopped later.
    container_id = str(getattr(provider, "_container_id", "") or "")
    container = RunningContainer(url=url, container_id=container_id, provider=provider)
    if not CONTAINER_ID_RE.fullmatch(container_id):
        container.stop()
        raise EnvironmentRejected({"image": [
            f"{image} started, but Docker reported no container id to record; it was stopped again"
        ]})
    started = _started_containers.get()
    if started is not None:  # from here on, a refusal stops it (_stop_containers_on_failure)
        started.append(container)
    try:
        provider.wait_for_ready(url, timeout_s=60)
        container.url = normalise_base_url(url)
    except Exception as exc:
        raise EnvironmentRejected({"image": [f"starting {image} failed: {str(exc)[:500]}"]}) from None
    return container


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    """One docker CLI command, a fixed argv (no shell)."""
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S, check=False
    )


def environment_container_stop(*, environment: Environment) -> Environment:
    """Stop and remove the container an image registration started; the entry stays, unhealthy."""
    container_id = environment.container_id
    if not container_id:
        raise EnvironmentRejected({"container": [f"'{environment.name}' has no container started here"]})
    if not CONTAINER_ID_RE.fullmatch(container_id):
        raise EnvironmentRejected({"container": [f"'{environment.name}' records no valid container id"]})
    if not docker_available():
        raise EnvironmentRejected({"container": ["no Docker engine on this machine to stop the container with"]})
    try:
        stopped = _docker("stop", container_id)
        if stopped.returncode == 0 or "no such container" in stopped.stderr.lower():
            _docker("rm", "--force", container_id)
        else:
            raise EnvironmentRejected({"container": [
                f"docker stop {container_id[:12]} failed: {stopped.stderr.strip()[:300] or stopped.returncode}"
            ]})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentRejected({"container": [f"docker stop {container_id[:12]} failed: {exc}"]}) from None
    # Every entry of that container (one per environment of a multi-environment ORS server,
    # all made by one registration) now points at a stopped server.
    stopped_at = timezone.now()
    Environment.objects.filter(container_id=container_id).exclude(pk=environment.pk).update(
        container_id="", status=Environment.Status.UNHEALTHY,
        last_error=f"its container {container_id[:12]} was stopped", checked_at=stopped_at,
    )
    environment.container_id = ""
    environment.status = Environment.Status.UNHEALTHY
    environment.last_error = f"its container {container_id[:12]} was stopped"
    environment.checked_at = stopped_at
    environment.save(update_fields=["container_id", "status", "last_error", "checked_at"])
    return environment


def environment_name_errors(
    *, owner: User | None, name: str, allow_reserved: bool = False
) -> list[str]:
    """What is wrong with `name` for a new entry of `owner`: its length, a bundled server's
    name (webapp.catalog.names), or one of the owner's own entries already has it. Other
    users' entries are not looked at, so the answer says nothing about them (security
    review K5). `allow_reserved` only for the bundled registration and the operator's
    `envlab_setup`, never for a user's request."""
    if not name or len(name) > 100:
        return ["give a name of 1 to 100 characters"]
    refusal = "" if allow_reserved else reserved_name_refusal(name)
    if refusal:
        return [refusal]
    if own_names_taken(owner=owner, names=[name]):
        return [f"you already have an environment named '{name}'"]
    return []


def _check_fields(
    *, owner: User | None, name: str, kind: str, base_url: str, image: str,
    capacity: int | None, ors_catalog: str, api_key_env: str, allow_reserved: bool,
) -> dict[str, list[str]]:
    """Checks before anything is started or probed. The given name must be free even when the
    server turns out to host several environments (entries `<name>-<environment>`): one
    rule, said before any probe or container start."""
    errors: dict[str, list[str]] = {}
    name_errors = environment_name_errors(owner=owner, name=name, allow_reserved=allow_reserved)
    if name_errors:
        errors["name"] = name_errors
    if kind and environment_kind(kind) is None:
        errors["kind"] = [f"unknown kind '{kind}'; use {kind_names()} (or leave it empty to detect it)"]
    if capacity is not None and not (1 <= capacity <= 100_000):
        errors["capacity"] = ["capacity must be between 1 and 100000"]
    sources = [bool(base_url), bool(image), bool(ors_catalog)]
    if sum(sources) != 1:
        errors["base_url"] = ["give exactly one of base_url, image (a container image) or ors_catalog (Org/Env)"]
    if image and not IMAGE_RE.fullmatch(image):
        errors["image"] = ["not a container image reference like 'registry/name:tag'"]
    if ors_catalog and not ORS_CATALOG_RE.fullmatch(ors_catalog):
        errors["ors_catalog"] = ["an Open Reward catalog name looks like 'Org/Env'"]
    errors.update(_check_api_key_env(api_key_env=api_key_env, ors_catalog=ors_catalog))
    return errors


def _check_api_key_env(*, api_key_env: str, ors_catalog: str) -> dict[str, list[str]]:
    """A key variable may be named only for the Open Reward catalog (a fixed, configured host)
    and only from the operator's allow-list: any other name or destination would let a user
    send the server's environment to a server of their choosing. Whether a variable is set is
    never said (that would tell users which variables exist)."""
    if not api_key_env:
        return {}
    allowed = list(settings.ENVLAB_API_KEY_ENV_ALLOWED)
    if not ors_catalog:
        return {"api_key_env": [
            "api_key_env is accepted only with ors_catalog (the Open Reward catalog); a server given "
            "by base_url or image gets no key from this installation"
        ]}
    if api_key_env not in allowed:
        names = ", ".join(allowed) or "none (ENVLAB_API_KEY_ENV_ALLOWED is empty)"
        return {"api_key_env": [f"api_key_env must be one of the names this installation allows: {names}"]}
    return {}


class Registration(TypedDict, total=False):
    """What a registration takes besides its owner and name: the server (one of `base_url`,
    `image`, `ors_catalog`), its kind and capacity, and the entry's sharing. Left out: empty,
    or None for `capacity`, False for the flags."""

    base_url: str
    kind: str
    capacity: int | None
    measure_capacity: bool
    ors_env: str
    image: str
    ors_catalog: str
    api_key_env: str
    shared: bool


def environment_register(
    *,
    owner: User | None,
    name: str,
    allow_reserved_name: bool = False,
    **fields: Unpack[Registration],
) -> Environment:
    """Probe the server first; only a server that answers as an environment is stored.

    One entry, named `name`: an ORS server hosting several environments needs `ors_env`
    (`environments_register` registers them all). `kind` empty means detect it (OpenEnv or
    Open Reward Standard). `capacity` is declared, or measured when `measure_capacity`
    (OpenEnv: sessions opened until CAPACITY_REACHED). The name must be free among the
    owner's own entries and not a bundled server's; `allow_reserved_name` is for the bundled
    registration and `envlab_setup` only (webapp.catalog.names), never for a user's request.
    """
    return _register(owner=owner, name=name, every=False, allow_reserved=allow_reserved_name, **fields)[0]


def environments_register(
    *, owner: User | None, name: str, **fields: Unpack[Registration]
) -> list[Environment]:
    """As `environment_register`, and an ORS server hosting several environments, with no
    `ors_env` chosen, gets one entry per environment, named `<name>-<environment>`, in the
    server's order. All or nothing: `name` or any of those names taken (or one environment
    that does not probe) refuses the whole set and writes no row. Taken means taken among
    the owner's own entries, or reserved (webapp.catalog.names). A server with one
    environment, or `ors_env` given, is one entry named `name`, as `environment_register` makes.
    """
    return _register(owner=owner, name=name, every=True, **fields)


# What a server's environment name must look like to become part of an entry's name
# (`<name>-<environment>`): the ORS SDK names environments by lower-cased class names.
ORS_ENV_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _entry_names(*, name: str, results: list[ProbeResult]) -> list[str]:
    """The catalog name of each probed environment: `name` for one, `<name>-<ors_env>` for several."""
    if len(results) == 1:
        return [name]
    ors_envs = [str(result.metadata.get("ors_env", "")) for result in results]
    odd = [env for env in ors_envs if not ORS_ENV_NAME_RE.fullmatch(env)]
    if odd:
        raise EnvironmentRejected({"base_url": [
            f"the server hosts environments whose names cannot be part of a catalog name "
            f"({', '.join(repr(env) for env in odd)}): register one at a time with ors_env"
        ]})
    names = [f"{name}-{env}" for env in ors_envs]
    too_long = [entry for entry in names if len(entry) > 100]
    if too_long:
        raise EnvironmentRejected({"name": [
            f"the entries of this server are named '<name>-<environment>', and "
            f"{', '.join(repr(entry) for entry in too_long)} would be over 100 characters: give a shorter name"
        ]})
    return names


def _names_taken(
    *, owner: User | None, names: list[str], allow_reserved: bool
) -> dict[str, list[str]]:
    """The entry names a registration would make that the owner cannot have: their own
    entries' names, and (but for the bundled registration) reserved ones."""
    reserved = [] if allow_reserved else [entry for entry in names if name_is_reserved(entry)]
    taken = own_names_taken(owner=owner, names=names)
    if not taken and not reserved:
        return {}
    if len(names) == 1:
        return {"name": [reserved_name_refusal(names[0]) if reserved
                         else f"you already have an environment named '{names[0]}'"]}
    problems = []
    if taken:
        problems.append(
            f"you already have {', '.join(taken)}" if len(taken) > 1 else f"you already have {taken[0]}"
        )
    if reserved:
        problems.append(f"{', '.join(reserved)} {'is' if len(reserved) == 1 else 'are'} reserved for "
                        "the bundled environments")
    return {"name": [
        f"the server hosts {len(names)} environments, to be named {', '.join(names)}; "
        f"{' and '.join(problems)}, so none was registered: give another name, or register one "
        "environment with ors_env"
    ]}


@_stop_containers_on_failure
def _register(
    *,
    owner: User | None,
    name: str,
    every: bool,
    allow_reserved: bool = False,
    base_url: str = "",
    kind: str = "",
    capacity: int | None = None,
    measure_capacity: bool = False,
    ors_env: str = "",
    image: str = "",
    ors_catalog: str = "",
    api_key_env: str = "",
    shared: bool = False,
) -> list[Environment]:
    name = (name or "").strip()
    base_url, image, ors_catalog = (base_url or "").strip(), (image or "").strip(), (ors_catalog or "").strip()
    api_key_env, ors_env = (api_key_env or "").strip(), (ors_env or "").strip()
    errors = _check_fields(
        owner=owner, allow_reserved=allow_reserved, name=name, kind=kind or "", base_url=base_url,
        image=image, capacity=capacity,
        ors_catalog=ors_catalog, api_key_env=api_key_env,
    )
    if owner is not None and not allow_reserved:
        # Before any probe: every entry is re-probed each ENVLAB_RECHECK_SECONDS (review N4, N6).
        limit = int(settings.ENVLAB_MAX_ENVIRONMENTS_PER_USER)
        held = Environment.objects.filter(owner=owner).count()
        if held >= limit:
            raise EnvironmentRejected({"non_field_errors": [
                f"you have {held} registered environments, and one account may have at most {limit} "
                "(ENVLAB_MAX_ENVIRONMENTS_PER_USER): delete one you no longer use"
            ]})
    if base_url:
        try:
            base_url = normalise_base_url(base_url)
        except ProbeError as exc:
            errors["base_url"] = [str(exc)]
    if ors_catalog and not api_key_env and not errors.get("api_key_env") and not _has_openreward_key(owner):
        errors["api_key_env"] = [
            "an Open Reward catalog environment needs an API key: store yours on your account page, "
            "or name a variable this installation allows (api_key_env)"
        ]
    if image and "image" not in errors:
        refusal = _image_refusal(owner=owner, image=image)
        if refusal:
            errors["image"] = [refusal]
    if image and not errors and not docker_available():
        errors["image"] = [
            "no Docker engine on this machine, so the image cannot be started here: run it where Docker "
            "is (e.g. docker run -p 8000:8000 IMAGE) and register its URL instead"
        ]
    if errors:
        raise EnvironmentRejected(errors)
    metadata_extra: dict[str, object] = {}
    container: RunningContainer | None = None
    if image:
        container = _start_container(image)
        base_url = container.url
        metadata_extra["image"] = image
    if ors_catalog:
        kind = Environment.Kind.ORS
        base_url = normalise_base_url(settings.ENVLAB_OPENREWARD_API_URL)
        ors_env = ors_env or ors_catalog
        metadata_extra.update({"ors_catalog": ors_catalog})
    if api_key_env:
        metadata_extra["api_key_env"] = api_key_env
    try:
        results = (
            probe_environments(base_url, kind=kind or None, ors_env=ors_env) if every
            else [probe_environment(base_url, kind=kind or None, ors_env=ors_env)]
        )
    except ProbeError as exc:
        raise EnvironmentRejected({"ors_catalog" if ors_catalog else "base_url": [str(exc)]}) from None
    for result in results:
        if not result.healthy:
            raise EnvironmentRejected({"base_url": [result.error]})
    names = _entry_names(name=name, results=results)
    capacity_metadata: dict[str, Any] = {"capacity_source": CAPACITY_DECLARED} if capacity is not None else {}
    if measure_capacity and capacity is None:
        if not _capacity_measurable(results[0].kind):
            raise EnvironmentRejected({"capacity": [f"{_measurable_refusal()}; declare it"]})
        try:
            measured = probe_capacity(base_url)
        except ProbeError as exc:
            raise EnvironmentRejected({"capacity": [f"measuring capacity failed: {exc}"]}) from None
        capacity = measured.capacity
        capacity_metadata = _measured_metadata({}, measured)
        if capacity < 1:
            raise EnvironmentRejected({"capacity": ["the server refused every session (CAPACITY_REACHED)"]})
    taken = _names_taken(owner=owner, names=names, allow_reserved=allow_reserved)
    if taken:
        raise EnvironmentRejected(taken)
    checked_at = timezone.now()
    try:
        with transaction.atomic():
            return [
                Environment.objects.create(
                    owner=owner,
                    name=entry_name,
                    kind=result.kind,
                    base_url=base_url,
                    status=Environment.Status.HEALTHY,
                    tools=result.tools,
                    metadata={**result.metadata, **metadata_extra, **capacity_metadata},
                    # Entries of one server declare the same capacity: it is the server's.
                    capacity=capacity,
                    checked_at=checked_at,
                    shared=shared,
                    container_id=container.container_id if container else "",
                )
                for entry_name, result in zip(names, results, strict=True)
            ]
    except IntegrityError:
        # Another request took one of the names since the check: this one writes nothing.
        raise EnvironmentRejected(
            _names_taken(owner=owner, names=names, allow_reserved=allow_reserved)
            or {"name": ["you just registered an environment of that name"]}
        ) from None


def environment_probe(*, environment: Environment) -> Environment:
    """Re-read the server and store what it says, healthy or not."""
    return _probe_store(environment, _probe_read(environment))


def _probe_read(environment: Environment) -> ProbeResult | ProbeError:
    """What the server says (the network part: no database)."""
    try:
        return probe_environment(
            environment.base_url, kind=environment.kind,
            ors_env=str((environment.metadata or {}).get("ors_env", "")),
        )
    except ProbeError as exc:
        return exc


def _probe_store(environment: Environment, outcome: ProbeResult | ProbeError) -> Environment:
    result = outcome if isinstance(outcome, ProbeResult) else None
    if result is None:
        environment.status = Environment.Status.UNHEALTHY
        environment.last_error = str(outcome)
    if result is not None:
        environment.status = Environment.Status.HEALTHY if result.healthy else Environment.Status.UNHEALTHY
        environment.last_error = result.error
        environment.tools = result.tools
        keep = {k: v for k, v in (environment.metadata or {}).items() if k in KEPT_ON_PROBE}
        environment.metadata = {**result.metadata, **keep}
    environment.checked_at = timezone.now()
    environment.save(update_fields=["status", "last_error", "tools", "metadata", "checked_at"])
    return environment


@transaction.atomic
def environment_set_shared(*, environment: Environment, shared: bool) -> Environment:
    """Share an entry with every user (they see it and may train on it) or make it private.
    Who may call this is the caller's check (webapp.catalog.selectors). Made private, it is
    announced (webapp.catalog.signals): the runs app stops other users' runs on it in the
    same transaction (again when it was private already: runs that should not be there stop
    too, and stopping is idempotent)."""
    environment.shared = shared
    environment.save(update_fields=["shared"])
    if not shared:
        environment_unshared.send(sender=Environment, environment_id=environment.pk)
    return environment


def environment_measure_capacity(*, environment: Environment) -> Environment:
    """Measure an OpenEnv server's capacity now and store it."""
    if not _capacity_measurable(environment.kind):
        raise EnvironmentRejected({"capacity": [_measurable_refusal()]})
    active = environment_active_runs(environment=environment)
    if active:
        # Measuring opens sessions until the server refuses: the runs' rollouts would be refused too.
        raise EnvironmentRejected({"capacity": [
            f"{len(active)} queued or running run(s) use '{environment.name}': measuring opens sessions "
            "until the server refuses, which would fail their rollouts; measure it once they finish"
        ]})
    try:
        measured = probe_capacity(environment.base_url)
    except ProbeError as exc:
        raise EnvironmentRejected({"capacity": [f"measuring capacity failed: {exc}"]}) from None
    environment.capacity = measured.capacity
    environment.metadata = _measured_metadata(environment.metadata or {}, measured)
    environment.save(update_fields=["capacity", "metadata"])
    return environment


@transaction.atomic
def environment_capacity_learned(
    *, environment_id: int, capacity: int, run_id: int | None = None, step: int | None = None,
    phase: str = "", evaluation_id: int | None = None,
) -> bool:
    """Store the session limit a server stated when it refused a session (CAPACITY_REACHED):
    its own word beats a declaration or a measurement, so the next launch whose generation
    batch exceeds it is refused at launch instead of failing mid-run. Where it was learned
    (`run_id` at `step` of `phase`, or `evaluation_id`) is kept for the environment's page.
    Returns False when the row is gone or the number is not a usable limit."""
    if capacity < 1:
        return False  # a server that takes no session at all says something else is wrong
    environment = Environment.objects.select_for_update().filter(pk=environment_id).first()
    if environment is None:
        return False
    where = {
        key: value for key, value in
        (("run", run_id), ("step", step), ("phase", phase or None), ("evaluation", evaluation_id))
        if value is not None
    }
    metadata = {k: v for k, v in (environment.metadata or {}).items() if k != "capacity_stopped_by"}
    environment.capacity = capacity
    environment.metadata = {**metadata, "capacity_source": CAPACITY_LEARNED, "capacity_learned": where}
    environment.save(update_fields=["capacity", "metadata"])
    return True


def environments_recheck(
    *, older_than_seconds: float = 0, budget_seconds: float | None = None, concurrency: int | None = None
) -> int:
    """Re-probe the environments checked longer ago than `older_than_seconds`, the longest
    unchecked first (healthy before unhealthy among equals), `concurrency` at a time
    (ENVLAB_RECHECK_CONCURRENCY), starting none after `budget_seconds` (ENVLAB_RECHECK_SECONDS):
    a few servers that answer slowly delay a round by about one probe deadline, not one each
    (security review N6), and what a round did not reach goes first in the next. Returns how
    many were re-probed."""
    budget = float(settings.ENVLAB_RECHECK_SECONDS if budget_seconds is None else budget_seconds)
    workers = max(1, int(settings.ENVLAB_RECHECK_CONCURRENCY if concurrency is None else concurrency))
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    due = list(
        Environment.objects.filter(Q(checked_at__isnull=True) | Q(checked_at__lte=cutoff))
        .order_by(F("checked_at").asc(nulls_first=True), "status", "pk")
    )
    ends = time.monotonic() + budget

    def read(environment: Environment) -> ProbeResult | ProbeError | None:
        # The threads only talk to the servers; this thread stores what they heard.
        return None if time.monotonic() >= ends else _probe_read(environment)

    count = 0
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="recheck") as pool:
        for environment, outcome in zip(due, pool.map(read, due), strict=True):
            if outcome is not None:
                _probe_store(environment, outcome)
                count += 1
    return count
