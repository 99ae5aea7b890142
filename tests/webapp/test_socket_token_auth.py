"""WebSockets signed in with an API token (`Authorization: Token <token>` in the handshake), as
the `envlab` command's `runs launch --watch` opens them: the token's user gets what their
session would get, a bad token gets nothing (not the cookie's user either), and a token
revoked or expired while the socket is open closes it at the next re-check."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path
from django.utils import timezone
from knox.models import AuthToken

from tests.factories import RunFactory
from tests.support.websocket import WebsocketCommunicator, first_frame, signed_in_headers
from webapp.accounts.socket_auth import TokenSocketAuth
from webapp.runs.models import Run
from webapp.runs.telemetry.consumers import RunConsumer

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = [(b"origin", b"http://testserver"), (b"host", b"testserver")]


class Watchful(RunConsumer):
    recheck_seconds = 0.2


def _token(user: Any, **kwargs: Any) -> str:
    return AuthToken.objects.create(user=user, **kwargs)[1]


def _token_headers(token: str) -> list[tuple[bytes, bytes]]:
    return [*ORIGIN, (b"authorization", f"Token {token}".encode())]


@pytest.fixture
def run(owner: Any) -> Run:
    return RunFactory(owner=owner, name="mine", max_steps=3)


def _first_frame(run: Run, headers: list[tuple[bytes, bytes]]) -> Any:
    """The first frame through the lab's own ASGI application (webapp.asgi)."""
    from webapp.asgi import application

    return first_frame(application, f"/ws/runs/{run.pk}/", headers)


@pytest.mark.parametrize(
    ("persona", "sees"),
    [("owner", True), ("operator", True), ("outsider", False), ("staff", False)],
)
def test_a_token_socket_sees_what_its_user_may(request: Any, run: Run, persona: str, sees: bool) -> None:
    frame = _first_frame(run, _token_headers(_token(request.getfixturevalue(persona))))

    if sees:
        assert (frame["type"], frame["run"], frame["status"], frame["seq"]) == ("snapshot", run.pk, "queued", 0)
    else:
        assert frame == {"type": "websocket.close", "code": 4404}


def test_a_wrong_or_expired_token_is_unauthenticated_even_with_the_owners_cookie(
    owner: Any, run: Run
) -> None:
    cookie_headers, _ = signed_in_headers(owner)
    expired = _token(owner, expiry=timedelta(seconds=-1))
    for token in ("not-a-token", expired):
        headers = [*cookie_headers, (b"authorization", f"Token {token}".encode())]
        assert _first_frame(run, headers) == {"type": "websocket.close", "code": 4401}
    # Knox removes the expired token it met; the owner's cookie alone still works.
    assert AuthToken.objects.filter(user=owner).count() == 0
    assert _first_frame(run, cookie_headers)["type"] == "snapshot"


@pytest.mark.parametrize("lose", ["revoke", "expire"])
def test_an_open_token_socket_closes_once_the_token_is_revoked_or_expired(
    owner: Any, run: Run, lose: str
) -> None:
    instance, token = AuthToken.objects.create(user=owner)
    application = AllowedHostsOriginValidator(
        AuthMiddlewareStack(TokenSocketAuth(URLRouter([path("ws/runs/<int:run_id>/", Watchful.as_asgi())])))
    )

    def lose_it() -> None:
        if lose == "revoke":
            instance.delete()
        else:
            AuthToken.objects.filter(pk=instance.pk).update(expiry=timezone.now() - timedelta(seconds=1))

    async def scenario() -> tuple[Any, Any]:
        communicator = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/", _token_headers(token))
        await communicator.connect(timeout=5)
        snapshot = json.loads((await communicator.receive_output(timeout=5))["text"])
        await database_sync_to_async(lose_it)()
        closed = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return snapshot, closed

    snapshot, closed = async_to_sync(scenario)()
    assert snapshot["type"] == "snapshot"
    assert closed == {"type": "websocket.close", "code": 4401}
