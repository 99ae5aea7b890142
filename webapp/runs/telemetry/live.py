"""Small notifications to a run's channel group. Delivery is best effort: the database is
the truth and clients catch up over REST, so a Redis outage is logged, never raised."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)
SEND_TIMEOUT = 2.0


def run_group(run_id: int) -> str:
    return f"run-{run_id}"


def run_message(payload: dict[str, Any]) -> dict[str, Any]:
    """The channel-layer message that carries one note to a run's sockets: its type routes
    it to RunConsumer.run_event, which relays the payload to the page as it is."""
    return {"type": "run.event", "payload": payload}


def notify_run(run_id: int, payload: dict[str, Any]) -> None:
    """Send from synchronous code (views, services). Never raises."""
    layer = get_channel_layer()
    if layer is None:
        return
    async def send() -> None:
        # Bounded: the layer's sockets have no timeout (idle consumers need that), and a
        # frozen Redis must not hang a request or the end of a training run.
        await asyncio.wait_for(
            layer.group_send(run_group(run_id), run_message(payload)), SEND_TIMEOUT
        )

    try:
        async_to_sync(send)()
    except Exception as exc:  # Redis down or frozen: the page catches up from the database
        log.warning("live notification for run %s dropped: %s", run_id, exc)
