"""Blocking work from an async view, off the thread the other requests' sync work shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

T = TypeVar("T")


async def on_own_thread(work: Callable[..., T], **kwargs: Any) -> T:
    """`work(**kwargs)` on a worker thread of its own (a long probe or server start holds up
    no other request), closing that thread's database connections when it is done."""

    def run() -> T:
        try:
            return work(**kwargs)
        finally:
            connections.close_all()  # this worker thread's connections, not the request's

    return await sync_to_async(run, thread_sensitive=False)()
