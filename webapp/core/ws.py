"""The lab's WebSocket base: accept, check the user, close with a code the page does not
retry, re-check access on a timer while the socket is open, and refuse oversized frames
before they are parsed.

A refused handshake only shows as 1006 in the browser, so a consumer accepts first and then
closes with a 4xxx code: the page must know not to retry. A socket can stay open for hours,
so who may use it is checked again every `recheck_seconds` (`recheck`, per consumer).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_MANY = 4429
# Standard codes: "try again later" (the page reconnects) and "message too big".
CLOSE_TRY_AGAIN = 1013
CLOSE_TOO_BIG = 1009


class GuardedConsumer(AsyncJsonWebsocketConsumer):
    """Subclasses implement `opened` (the user is signed in) and `recheck`."""

    recheck_seconds: float = 15.0
    # Frames the client may send are small commands; anything larger closes the socket.
    max_message_bytes: int = 10 * 1024
    watch_task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        await self.opened(user)

    async def opened(self, user: Any) -> None:
        raise NotImplementedError

    async def recheck(self) -> bool:
        """Whether the socket stays open; a consumer that closes it returns False."""
        raise NotImplementedError

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        size = len(text_data.encode()) if text_data is not None else len(bytes_data or b"")
        if size > self.max_message_bytes:
            await self.close(code=CLOSE_TOO_BIG)
            return
        await super().receive(text_data=text_data, bytes_data=bytes_data, **kwargs)

    def start_watch(self) -> None:
        self.watch_task = asyncio.create_task(self._watch())

    def stop_watch(self) -> None:
        if self.watch_task is not None and self.watch_task is not asyncio.current_task():
            self.watch_task.cancel()
        self.watch_task = None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.recheck_seconds)
            try:
                if not await self.recheck():
                    return
            except Exception:  # the database away for a moment: check again next round
                log.warning("%s: re-check failed", type(self).__name__, exc_info=True)
