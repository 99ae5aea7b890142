"""The console page of an environment: its tools as forms, driven over a WebSocket."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.catalog.console import MAX_MESSAGE_BYTES
from webapp.catalog.views import controlled_environment


@login_required
def environment_console(request: HttpRequest, pk: int) -> HttpResponse:
    # The same rule as the socket's: the owner, or a user with catalog.change_environment.
    environment = controlled_environment(request, pk)
    return render(
        request,
        "catalog/console.html",
        {
            "environment": environment,
            "console": {
                "environment": environment.pk,
                "ws_path": f"/ws/environments/{environment.pk}/console/",
                "max_message_bytes": MAX_MESSAGE_BYTES,
            },
            "nav": "environments",
        },
    )
