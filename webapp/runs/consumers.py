"""WebSocket /ws/runs/<id>/: authorise, join the run's group, send a snapshot, relay events.

Messages are small notifications; the page reads state over REST and uses `seq` to
detect what it missed.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from webapp.runs.live import run_group
from webapp.runs.selectors import run_progress, runs_visible_to

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


@database_sync_to_async
def _snapshot(user: Any, run_id: int) -> dict[str, Any] | None:
    run = runs_visible_to(user=user).filter(pk=run_id).first()
    if run is None:
        return None
    return {
        "type": "snapshot", "seq": run.last_seq, "run": run.pk, "status": run.status,
        "error": run.error, **run_progress(run=run),
    }


class RunConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        # Accept then close with a 4xxx code: a refused handshake only shows as 1006 in the
        # browser, and the page must know not to retry.
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        snapshot = await _snapshot(user, run_id)
        if snapshot is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = run_group(run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # Re-read after joining so nothing published in between is missed.
        snapshot = await _snapshot(user, run_id) or snapshot
        await self.send_json(snapshot)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The socket is one-way; anything the client sends is ignored, except a ping.
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def run_event(self, event: dict[str, Any]) -> None:
        payload = event.get("payload")
        if isinstance(payload, dict):
            await self.send_json(payload)

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)


