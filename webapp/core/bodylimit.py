"""An ASGI wrapper that refuses request bodies over `settings.ENVLAB_MAX_REQUEST_BYTES`.

Django's ASGI handler buffers (and spools to disk) a whole body before any view or
authentication runs, and uvicorn sets no limit, so an anonymous client could fill the disk.
This counts bytes as they arrive, chunked uploads included, and answers 413 as soon as the
limit is passed. A proxy in front should set the same limit (`client_max_body_size`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

# As Django's ASGIHandler takes them: the scope is the server's dict, messages are only read.
Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class _TooLarge(Exception):
    pass


class BodySizeLimit:
    def __init__(self, app: App, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        try:
            if declared is not None and int(declared) > self.limit:
                await self._refuse(send)
                return
        except ValueError:
            await self._refuse(send, status=400, detail="invalid Content-Length")
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise _TooLarge
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message.get("type") == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send, *, status: int = 413, detail: str = "") -> None:
        megabytes = self.limit / (1024 * 1024)
        body = json.dumps({"detail": detail or f"request body larger than {megabytes:g} MB"}).encode()
        await send({
            "type": "http.response.start", "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        })
        await send({"type": "http.response.body", "body": body})
