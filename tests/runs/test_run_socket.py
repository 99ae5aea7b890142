"""The run WebSocket: who may open it, and that it closes once its user loses access.

The consumer runs behind the same middleware as webapp.asgi (origin check, session auth)
with the real Redis channel layer of the test settings.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path

from tests.factories import RunFactory
from tests.support.websocket import WebsocketCommunicator, first_frame, signed_in_headers
from webapp.runs.models import Run
from webapp.runs.telemetry.consumers import RunConsumer

pytestmark = pytest.mark.django_db(transaction=True)


class Watchful(RunConsumer):
    recheck_seconds = 0.2


def _application(consumer: type[RunConsumer]) -> Any:
    route = path("ws/runs/<int:run_id>/", consumer.as_asgi())
    return AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter([route])))


@pytest.fixture
def run(owner: Any) -> Run:
    return RunFactory(owner=owner, name="mine", max_steps=3)


def _first_frame(run: Run, headers: list[tuple[bytes, bytes]]) -> Any:
    return first_frame(_application(RunConsumer), f"/ws/runs/{run.pk}/", headers)


@pytest.mark.parametrize(
    ("persona", "sees"),
    [("owner", True), ("operator", True), ("outsider", False), ("staff", False)],
)
def test_who_gets_the_snapshot(request: Any, run: Run, persona: str, sees: bool) -> None:
    headers, _ = signed_in_headers(request.getfixturevalue(persona))

    frame = _first_frame(run, headers)

    if sees:
        assert (frame["type"], frame["run"], frame["status"], frame["seq"]) == (
            "snapshot",
            run.pk,
            "queued",
            0,
        )
    else:  # staff status alone shows nobody's run: runs.view_run does
        assert frame == {"type": "websocket.close", "code": 4404}


def _deactivate(user: Any) -> None:
    type(user).objects.filter(pk=user.pk).update(is_active=False)


@pytest.mark.parametrize(
    ("persona", "lose_access", "code"),
    [("owner", "log_out", 4401), ("owner", "deactivate", 4401), ("operator", "revoke", 4404)],
)
def test_an_open_socket_is_closed_once_access_is_lost(
    request: Any, run: Run, persona: str, lose_access: str, code: int
) -> None:
    user = request.getfixturevalue(persona)
    headers, client = signed_in_headers(user)
    lose = {
        "log_out": lambda: client.post("/logout/"),
        "deactivate": lambda: _deactivate(user),
        "revoke": lambda: user.user_permissions.clear(),
    }[lose_access]

    async def scenario() -> tuple[Any, Any, Any]:
        communicator = WebsocketCommunicator(_application(Watchful), f"/ws/runs/{run.pk}/", headers)
        await communicator.connect(timeout=5)
        snapshot = json.loads((await communicator.receive_output(timeout=5))["text"])
        await communicator.send_json_to({"type": "ping"})
        pong = json.loads((await communicator.receive_output(timeout=5))["text"])
        await database_sync_to_async(lose)()
        closed = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return snapshot, pong, closed

    snapshot, pong, closed = async_to_sync(scenario)()
    assert (snapshot["type"], pong) == ("snapshot", {"type": "pong"})
    assert closed == {"type": "websocket.close", "code": code}


def test_an_oversized_frame_closes_the_socket_unparsed(owner: Any, run: Run) -> None:
    """The page only ever sends pings: a frame past the base consumer's cap (10 kB) is not
    decoded at all, and the socket closes with 1009 (message too big)."""
    headers, _ = signed_in_headers(owner)

    async def scenario() -> tuple[Any, Any]:
        communicator = WebsocketCommunicator(_application(RunConsumer), f"/ws/runs/{run.pk}/", headers)
        await communicator.connect(timeout=5)
        await communicator.receive_output(timeout=5)  # the snapshot
        await communicator.send_to(text_data=json.dumps({"type": "ping", "pad": "x" * 11_000}))
        closed = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return closed, RunConsumer.max_message_bytes

    closed, cap = async_to_sync(scenario)()
    assert cap == 10 * 1024
    assert closed == {"type": "websocket.close", "code": 1009}
