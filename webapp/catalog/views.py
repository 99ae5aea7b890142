"""Pages of the environment catalog: list and register, detail, probe."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from webapp.catalog.forms import EnvironmentRegisterForm
from webapp.catalog.models import Environment
from webapp.catalog.services import EnvironmentRejected, environment_probe, environment_register


def _add_service_errors(form: EnvironmentRegisterForm, errors: dict[str, list[str]]) -> None:
    for field, field_messages in errors.items():
        target = field if field in form.fields else None
        for message in field_messages:
            form.add_error(target, message if target else f"{field}: {message}")


@login_required
@require_http_methods(["GET", "POST"])
def environment_list(request: HttpRequest) -> HttpResponse:
    form = EnvironmentRegisterForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            environment = environment_register(
                owner=request.user,
                name=form.cleaned_data["name"],
                base_url=form.cleaned_data["base_url"],
                capacity=form.cleaned_data["capacity"],
            )
        except EnvironmentRejected as exc:
            _add_service_errors(form, exc.errors)
        else:
            messages.success(request, f"Registered environment '{environment.name}'.")
            return redirect("environment-detail", pk=environment.pk)
    return render(
        request,
        "catalog/environment_list.html",
        {"environments": Environment.objects.all(), "form": form, "nav": "environments"},
    )


def _parameters(tool: dict) -> list[dict[str, str | bool]]:
    """A tool's JSON-schema parameters as rows for the page; stored shapes are untrusted."""
    schema = tool.get("parameters") if isinstance(tool, dict) else None
    if not isinstance(schema, dict):
        return []
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
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
    environment = get_object_or_404(Environment, pk=pk)
    tools = [
        {
            "name": str(tool.get("name", "")) if isinstance(tool, dict) else str(tool),
            "description": str(tool.get("description", "")) if isinstance(tool, dict) else "",
            "parameters": _parameters(tool),
        }
        for tool in (environment.tools if isinstance(environment.tools, list) else [])
    ]
    metadata = environment.metadata if isinstance(environment.metadata, dict) else {}
    return render(
        request,
        "catalog/environment_detail.html",
        {
            "environment": environment,
            "tools": tools,
            "metadata": sorted(
                (str(k), v if isinstance(v, str) else json.dumps(v)) for k, v in metadata.items()
            ),
            "nav": "environments",
        },
    )


@login_required
@require_POST
def environment_probe_view(request: HttpRequest, pk: int) -> HttpResponse:
    environment = environment_probe(environment=get_object_or_404(Environment, pk=pk))
    if environment.status == Environment.Status.HEALTHY:
        messages.success(request, f"'{environment.name}' is healthy.")
    else:
        messages.error(
            request,
            f"'{environment.name}' is {environment.status}: {environment.last_error or 'no answer'}",
        )
    return redirect("environment-detail", pk=environment.pk)
