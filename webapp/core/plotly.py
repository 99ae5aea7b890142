"""plotly.js from the installed plotly package (no CDN), for every page that draws charts."""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import urlencode


@lru_cache(maxsize=1)
def _plotly_bundle() -> tuple[str, bytes, bytes]:
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    raw = path.read_bytes()
    return plotly.__version__, raw, gzip.compress(raw, compresslevel=6, mtime=0)


def plotly_version() -> str:
    import plotly

    return str(plotly.__version__)


def plotly_js(request: HttpRequest) -> HttpResponse:
    """4.8 MB served once per version: the page asks for `?v=<plotly version>`, so a year of
    caching is safe; gzip (compressed once per process) cuts the transfer to about a third."""
    version, raw, compressed = _plotly_bundle()
    etag = f'"plotly-{version}"'
    if etag in request.headers.get("If-None-Match", ""):
        response = HttpResponse(status=304)
    elif "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(compressed, content_type="application/javascript; charset=utf-8")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(raw, content_type="application/javascript; charset=utf-8")
    response["ETag"] = etag
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    patch_vary_headers(response, ["Accept-Encoding"])
    return response


def plotly_url() -> str:
    """The script's URL, versioned so that the year of caching is safe."""
    return f"{reverse('plotly-js')}?{urlencode({'v': plotly_version()})}"
