"""The API's documentation pages, Swagger UI (/api/docs/) and ReDoc (/api/redoc/), drawn from
/api/schema/ with the files drf-spectacular-sidecar ships: the pages load nothing from another
host. ReDoc's bundle is the one exception it has: its sidebar's "API docs by Redocly" logo is an
image on Redocly's CDN, unconditionally, so the lab serves that bundle with the address
replaced by an empty image (which ReDoc's own error handler then hides)."""

from __future__ import annotations

import functools
from pathlib import Path

from django.contrib.staticfiles import finders
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

REDOC_BUNDLE = "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
REDOC_OFF_HOST_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@functools.cache
def redoc_bundle() -> bytes:
    found = finders.find(REDOC_BUNDLE)
    if not found:
        raise FileNotFoundError(f"{REDOC_BUNDLE}: is drf-spectacular-sidecar installed?")
    source = Path(str(found)).read_text(encoding="utf-8")
    return source.replace(REDOC_OFF_HOST_LOGO, "data:,").encode()


@require_GET
def redoc_bundle_view(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(redoc_bundle(), content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "public, max-age=86400"
    return response
