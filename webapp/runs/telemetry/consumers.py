"""WebSocket /ws/runs/<id>/: authorise, join the run's group, send a snapshot, relay events.

Messages are small notifications; the page reads state over REST and uses `seq` to
detect what it missed. Besides the telemetry notes ("metrics", "rollouts", numbered by
`seq`), "status" and "facts" notes say that the run's status, facts (worker, attempts,
checkpoint...) or events changed (webapp.runs.selectors.run_live_note): the page re-reads
them, and re-reads them all on every snapshot, so a missed one is made good on reconnect.

Access is checked at connect and again every `recheck_seconds`: a socket whose user logged
out, was deactivated or can no longer see the run (webapp.runs.selectors) is closed with
4401 or 4404, which the page does not retry.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async

from webapp.accounts.socket_auth import socket_user
from webapp.core.ws import CLOSE_NOT_FOUND, CLOSE_TRY_AGAIN, CLOSE_UNAUTHENTICATED, GuardedConsumer
from webapp.runs.selectors import (
    run_last_event_id,
    run_progress,
    run_status_display,
    runs_visible_to,
)
from webapp.runs.telemetry.live import run_group

log = logging.getLogger(__name__)

@database_sync_to_async
def _can_see(user: Any, run_id: int) -> bool:
    return runs_visible_to(user=user).filter(pk=run_id).exists()


@database_sync_to_async
def _snapshot(user: Any, run_id: int) -> dict[str, Any] | None:
    run = runs_visible_to(user=user).filter(pk=run_id).first()
    if run is None:
        return None
    # `event`: the newest run event, so the page knows which events it already lists.
    return {
        "type": "snapshot", "seq": run.last_seq, "run": run.pk, "status": run.status,
        "status_display": run_status_display(run=run), "event": run_last_event_id(run_id=run.pk),
        "error": run.error, **run_progress(run=run),
    }


class RunConsumer(GuardedConsumer):
    group: str | None = None
    recheck_seconds: float = 15.0
    run_id: int = 0

    async def opened(self, user: Any) -> None:
        run_id = self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        snapshot = await _snapshot(user, run_id)
        if snapshot is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = run_group(run_id)
        if not await self._join(self.group):
            # The page reconnects and catches up over REST once Redis answers again.
            await self.close(code=CLOSE_TRY_AGAIN)
            return
        # Re-read after joining so nothing published in between is missed.
        snapshot = await _snapshot(user, run_id) or snapshot
        await self.send_json(snapshot)
        self.start_watch()

    async def recheck(self) -> bool:
        user = await socket_user(self.scope)
        code = None
        if not user.is_authenticated:
            code = CLOSE_UNAUTHENTICATED
        elif not await _can_see(user, self.run_id):
            code = CLOSE_NOT_FOUND
        if code is None:
            return True
        await self._leave()
        await self.close(code=code)
        return False

    async def _join(self, group: str) -> bool:
        """Join the run's group. After a Redis restart the layer's pooled connection fails
        once before it reconnects: try a few times before giving up."""
        for attempt in range(3):
            try:
                await self.channel_layer.group_add(group, self.channel_name)
                return True
            except Exception as exc:  # ConnectionError, TimeoutError from redis
                log.warning("joining %s failed (attempt %d): %s", group, attempt + 1, exc)
                await asyncio.sleep(0.2 * (attempt + 1))
        self.group = None
        return False

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The socket is one-way; anything the client sends is ignored, except a ping.
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def run_event(self, event: dict[str, Any]) -> None:
        payload = event.get("payload")
        if isinstance(payload, dict):
            await self.send_json(payload)

    async def disconnect(self, code: int) -> None:
        self.stop_watch()
        await self._leave()

    async def _leave(self) -> None:
        """Stop relaying the run's events (also before closing for lost access)."""
        group, self.group = self.group, None
        if group:
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception as exc:  # Redis away: the membership expires on its own
                log.warning("leaving %s failed: %s", group, exc)


