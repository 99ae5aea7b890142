"""Pages of the environment catalog: list and register, detail, probe, bundled servers.

Access (webapp.catalog.selectors): every page needs a login. A user sees their own
environments, the shared ones, and all with catalog.view_environment; any other is a 404.
Probing, measuring, sharing and stopping a container need ownership or
catalog.change_environment (else a 403 that says so); starting and stopping bundled
servers needs catalog.change_bundledserver.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from envs.adapters import episode_reward_rule
from webapp.catalog.bundled import (
    BUNDLED,
    BundledError,
    bundled_overview,
    bundled_register,
    bundled_start,
    bundled_stop,
    process_is_ours,
)
from webapp.catalog.capacity import capacity_note, capacity_shown
from webapp.catalog.forms import BundledStartForm, EnvironmentRegisterForm
from webapp.catalog.models import BundledServer, Environment
from webapp.catalog.probe import MAX_ORS_ENVIRONMENTS
from webapp.catalog.selectors import (
    BUNDLED_REFUSAL,
    bundled_can_control,
    environment_can_control,
    environment_for,
    environments_visible_to,
)
from webapp.catalog.services import (
    EnvironmentRejected,
    environment_container_stop,
    environment_measure_capacity,
    environment_probe,
    environment_set_shared,
    environments_register,
)
from webapp.core.threads import on_own_thread
from webapp.core.throttles import throttle_posts
from webapp.core.users import signed_in_user


def _visible_environment(request: HttpRequest, pk: int) -> Environment:
    return environment_for(user=request.user, pk=pk)


def controlled_environment(request: HttpRequest, pk: int) -> Environment:
    """404 for an environment the user cannot see; 403 for one they see but may not drive."""
    return environment_for(user=request.user, pk=pk, control=True)


def _add_service_errors(form: EnvironmentRegisterForm, errors: dict[str, list[str]]) -> None:
    for field, field_messages in errors.items():
        target = field if field in form.fields else None
        for message in field_messages:
            form.add_error(target, message if target else f"{field}: {message}")


@login_required
@throttle_posts("register")
@require_http_methods(["GET", "POST"])
def environment_list(request: HttpRequest) -> HttpResponse:
    form = EnvironmentRegisterForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            data = form.cleaned_data
            environments = environments_register(
                owner=signed_in_user(request),
                name=data["name"],
                kind=data["kind"],
                base_url=data["base_url"],
                image=data["image"],
                ors_catalog=data["ors_catalog"],
                ors_env=data["ors_env"],
                api_key_env=data["api_key_env"],
                capacity=data["capacity"],
                measure_capacity=data["measure_capacity"],
                shared=data["shared"],
            )
        except EnvironmentRejected as exc:
            _add_service_errors(form, exc.errors)
        else:
            if len(environments) == 1:
                messages.success(request, f"Registered environment '{environments[0].name}'.")
                return redirect("environment-detail", pk=environments[0].pk)
            names = ", ".join(f"'{e.name}'" for e in environments)
            messages.success(
                request,
                f"The server at {environments[0].base_url} hosts {len(environments)} environments; "
                f"registered {names}.",
            )
            ids = ",".join(str(e.pk) for e in environments)
            return redirect(f"{reverse('environment-list')}?registered={ids}")
    visible = environments_visible_to(user=request.user)
    return render(
        request,
        "catalog/environment_list.html",
        {
            "environments": visible,
            "registered": _registered_rows(visible, request.GET.get("registered", "")),
            "form": form,
            "bundled": _bundled_rows(),
            "can_control_bundled": bundled_can_control(user=request.user),
            "nav": "environments",
        },
    )


def _registered_rows(visible: QuerySet[Environment], raw_ids: str) -> list[dict[str, object]]:
    """The entries a registration just made (`?registered=1,2,3`), as the user may see them:
    what was found on the server. Ids that are not numbers or not visible are left out."""
    ids = [int(part) for part in raw_ids.split(",")[:MAX_ORS_ENVIRONMENTS] if part.isdigit()]
    if not ids:
        return []
    found = {e.pk: e for e in visible.filter(pk__in=ids)}
    rows: list[dict[str, object]] = []
    for pk in ids:
        environment = found.pop(pk, None)  # pop: an id given twice is listed once
        if environment is None:
            continue
        metadata = environment.metadata if isinstance(environment.metadata, dict) else {}
        splits = metadata.get("splits")
        rows.append({
            "environment": environment,
            "ors_env": str(metadata.get("ors_env", "")),
            "tools": [str(t.get("name", "")) for t in environment.tools if isinstance(t, dict)]
            if isinstance(environment.tools, list) else [],
            "splits": [
                (str(split), count if isinstance(count, int) else None) for split, count in splits.items()
            ] if isinstance(splits, dict) else [],
        })
    return rows


def _bundled_rows() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for spec, server in bundled_overview():
        wanted = server is not None and server.desired == BundledServer.Desired.RUNNING
        rows.append(
            {
                "spec": spec,
                "server": server,
                "status": server.status if server else "not started",
                "running": wanted,
                # The row says running but the process is gone: the supervisor restarts it.
                "process_gone": wanted
                and server is not None
                and server.status == BundledServer.Status.RUNNING
                and not process_is_ours(server.pid, spec),
            }
        )
    return rows


def _parameters(tool: dict) -> list[dict[str, str | bool]]:
    """A tool's JSON-schema parameters as rows for the page; stored shapes are untrusted."""
    schema = tool.get("parameters") if isinstance(tool, dict) else None
    if not isinstance(schema, dict):
        return []
    properties = found if isinstance(found := schema.get("properties"), dict) else {}
    required = found if isinstance(found := schema.get("required"), list) else []
    rows: list[dict[str, str | bool]] = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, dict) else {}
        rows.append(
            {
                "name": str(name),
                "type": str(prop.get("type", "")),
                "description": str(prop.get("description", "")),
                "required": name in required,
            }
        )
    return rows


@login_required
def environment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    environment = _visible_environment(request, pk)
    tools = [
        {
            "name": str(tool.get("name", "")) if isinstance(tool, dict) else str(tool),
            "description": str(tool.get("description", "")) if isinstance(tool, dict) else "",
            "parameters": _parameters(tool),
        }
        for tool in (environment.tools if isinstance(environment.tools, list) else [])
    ]
    metadata = environment.metadata if isinstance(environment.metadata, dict) else {}
    raw_splits = metadata.get("splits")
    splits = (
        [
            (str(name), count if isinstance(count, int) else None)
            for name, count in raw_splits.items()
        ]
        if isinstance(raw_splits, dict)
        else []
    )
    shown_apart = {"splits", "capacity_source", "capacity_stopped_by", "capacity_learned"}

    return render(
        request,
        "catalog/environment_detail.html",
        {
            "environment": environment,
            "can_control": environment_can_control(user=request.user, environment=environment),
            "tools": tools,
            "splits": splits,
            "episode_reward": episode_reward_rule(environment)[1],
            "capacity": capacity_shown(environment),
            "metadata": sorted(
                (str(k), v if isinstance(v, str) else json.dumps(v))
                for k, v in metadata.items()
                if k not in shown_apart
            ),
            "nav": "environments",
        },
    )


@login_required
@throttle_posts("probe")
@require_POST
def environment_probe_view(request: HttpRequest, pk: int) -> HttpResponse:
    environment = environment_probe(environment=controlled_environment(request, pk))
    if environment.status == Environment.Status.HEALTHY:
        messages.success(request, f"'{environment.name}' is healthy.")
    else:
        messages.error(
            request,
            f"'{environment.name}' is {environment.status}: {environment.last_error or 'no answer'}",
        )
    return redirect("environment-detail", pk=environment.pk)


def _flash_refusal(request: HttpRequest, what: str, exc: EnvironmentRejected) -> None:
    for field_messages in exc.errors.values():
        for message in field_messages:
            messages.error(request, f"{what}: {message}")


def _act_on_environment(
    request: HttpRequest,
    pk: int,
    action: Callable[..., Environment],
    *,
    refused: Callable[[Environment], str],
    done: Callable[[Environment], str],
) -> HttpResponse:
    """Run a service `action` on the user's environment `pk`: flash its refusal (headed by
    `refused`) or `done`, then back to the environment's page."""
    environment = controlled_environment(request, pk)
    try:
        environment = action(environment=environment)
    except EnvironmentRejected as exc:
        _flash_refusal(request, refused(environment), exc)
    else:
        messages.success(request, done(environment))
    return redirect("environment-detail", pk=environment.pk)


@login_required
@throttle_posts("capacity")
@require_POST
def environment_measure_capacity_view(request: HttpRequest, pk: int) -> HttpResponse:
    return _act_on_environment(
        request,
        pk,
        environment_measure_capacity,
        refused=lambda environment: f"Cannot measure '{environment.name}'",
        done=lambda environment: f"'{environment.name}' capacity: {capacity_note(environment)}.",
    )


@login_required
@require_POST
def environment_share_view(request: HttpRequest, pk: int) -> HttpResponse:
    environment = controlled_environment(request, pk)
    shared = request.POST.get("shared") == "1"
    environment = environment_set_shared(environment=environment, shared=shared)
    if shared:
        messages.success(request, f"'{environment.name}' is shared: every user sees it and may train on it.")
    else:
        messages.success(request, f"'{environment.name}' is private again.")
    return redirect("environment-detail", pk=environment.pk)


@login_required
@require_POST
def environment_container_stop_view(request: HttpRequest, pk: int) -> HttpResponse:
    return _act_on_environment(
        request,
        pk,
        environment_container_stop,
        refused=lambda environment: f"Cannot stop the container of '{environment.name}'",
        done=lambda environment: f"The container of '{environment.name}' was stopped.",
    )


# --- bundled servers --------------------------------------------------------------------------


def _bundled_key(key: str) -> str:
    if key not in BUNDLED:
        raise Http404("no such bundled server")
    return key


# Starting waits seconds for /health and stopping up to a grace period. Run under ASGI, a
# sync view shares one thread with every other sync view and ORM call of the site, so these
# two views are async and do that work on a thread of their own.


def _start_and_register(*, key: str, capacity: int | None, user: Any) -> tuple[int, str]:
    try:
        server = bundled_start(key=key, capacity=capacity)
    except BundledError as exc:
        return messages.ERROR, f"{key}: {exc}"
    if server.status != BundledServer.Status.RUNNING:
        first_line = (server.last_error or "no error recorded").splitlines()[0]
        return messages.ERROR, f"{key} did not start: {first_line} (log: {server.log_path})"
    try:
        environments = bundled_register(key=key, owner=user)
    except (BundledError, EnvironmentRejected) as exc:
        return messages.WARNING, f"{key} runs at {server.url} but was not registered: {exc}"
    names = ", ".join(f"'{e.name}' ({e.status})" for e in environments)
    return (
        messages.SUCCESS,
        f"{key} runs at {server.url}, capacity {server.capacity}; catalog: {names}.",
    )


def _stop_and_recheck(*, key: str) -> tuple[int, str]:
    bundled_stop(key=key)
    # Its catalog entries now point at a closed port: say so at once (a refused connection
    # answers immediately) rather than at the next periodic re-check.
    for environment in Environment.objects.filter(metadata__bundled=key):
        environment_probe(environment=environment)
    return messages.SUCCESS, f"{key} stopped."


async def _require_bundled_control(request: HttpRequest) -> None:
    user = await request.auser()
    if not await sync_to_async(bundled_can_control)(user=user):
        raise PermissionDenied(BUNDLED_REFUSAL)


@login_required
@require_POST
async def bundled_start_view(request: HttpRequest, key: str) -> HttpResponse:
    await _require_bundled_control(request)
    key = _bundled_key(key)
    form = BundledStartForm(request.POST)
    if not form.is_valid():
        for error in form.errors.get("capacity", []):
            messages.error(request, f"{key}: capacity: {error}")
        return redirect("environment-list")
    level, message = await on_own_thread(
        _start_and_register,
        key=key,
        capacity=form.cleaned_data["capacity"],
        user=await request.auser(),
    )
    messages.add_message(request, level, message)
    return redirect("environment-list")


@login_required
@require_POST
async def bundled_stop_view(request: HttpRequest, key: str) -> HttpResponse:
    await _require_bundled_control(request)
    level, message = await on_own_thread(_stop_and_recheck, key=_bundled_key(key))
    messages.add_message(request, level, message)
    return redirect("environment-list")
