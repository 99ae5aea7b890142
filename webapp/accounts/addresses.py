"""The address a request came from, the same for the throttles and the login lockout.

`X-Forwarded-For` is whatever the client wrote, unless proxies of the operator's stand in
front of the web server and append to it: ENVLAB_TRUSTED_PROXIES says how many. With none
(the default) the header is ignored and the socket's address counts; with N, the address N
hops from the right of the header (what the outermost trusted proxy saw). DRF's throttles
use the same rule through its NUM_PROXIES setting (rest_framework.throttling.get_ident).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings


def client_address(request: Any) -> str:
    meta = request.META
    remote = str(meta.get("REMOTE_ADDR") or "")
    proxies = int(getattr(settings, "ENVLAB_TRUSTED_PROXIES", 0))
    forwarded = meta.get("HTTP_X_FORWARDED_FOR")
    if proxies <= 0 or not forwarded:
        return remote
    hops = str(forwarded).split(",")
    return hops[-min(proxies, len(hops))].strip() or remote
