"""The bundled Open Reward Standard server behind a recorder of the API keys it is sent.

Stands in for "a server a user controls" in the secret-leak tests: every request's
`X-API-Key` header (or "-" when there is none) is appended to the file named by
`ENVLAB_RECORD_FILE`, one line per request.
"""

from __future__ import annotations

import os
from typing import Any

from envs.ors.server import app as ors_app

RECORD_FILE = os.environ.get("ENVLAB_RECORD_FILE", "")


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and RECORD_FILE:
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        with open(RECORD_FILE, "a") as record:
            record.write(f"{scope['path']} {headers.get('x-api-key', '-')}\n")
    await ors_app(scope, receive, send)
