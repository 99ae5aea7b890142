"""A WebSocket client for consumer tests, and a signed-in browser's headers."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock
from urllib.parse import urlparse

from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.test import Client


class WebsocketCommunicator(ApplicationCommunicator):
    """channels.testing.WebsocketCommunicator, reduced to what these tests use.

    channels.testing cannot be imported here: its __init__ imports daphne (for
    ChannelsLiveServerTestCase), which this project does not install. Like Channels' own,
    it keeps the consumer from closing the test's database connection between messages.
    """

    def __init__(self, application: Any, path: str, headers: list[tuple[bytes, bytes]]) -> None:
        parsed = urlparse(path)
        scope = {
            "type": "websocket",
            "path": parsed.path,
            "query_string": parsed.query.encode(),
            "headers": headers,
            "subprotocols": [],
        }
        super().__init__(application, scope)

    async def send_input(self, message: dict[str, Any]) -> None:
        with mock.patch("channels.db.close_old_connections", lambda: None):
            await super().send_input(message)

    async def receive_output(self, timeout: float = 1) -> Any:
        with mock.patch("channels.db.close_old_connections", lambda: None):
            return await super().receive_output(timeout)

    async def connect(self, timeout: float = 1) -> tuple[bool, Any]:
        await self.send_input({"type": "websocket.connect"})
        response = await self.receive_output(timeout)
        if response["type"] == "websocket.close":
            return False, response.get("code", 1000)
        assert response["type"] == "websocket.accept"
        return True, response.get("subprotocol")

    async def send_to(self, text_data: str) -> None:
        await self.send_input({"type": "websocket.receive", "text": text_data})

    async def send_json_to(self, data: Any) -> None:
        await self.send_to(json.dumps(data))

    async def receive_json_from(self, timeout: float = 1) -> Any:
        response = await self.receive_output(timeout)
        assert response["type"] == "websocket.send", response
        return json.loads(response["text"])

    async def receive_until_close(self, timeout: float = 5) -> list[Any]:
        """The frames that come until the socket is closed: each message's JSON, then the close
        frame itself (``{"type": "websocket.close", "code": ...}``)."""
        frames: list[Any] = []
        while True:
            frame = await self.receive_output(timeout)
            frames.append(json.loads(frame["text"]) if frame["type"] == "websocket.send" else frame)
            if frame["type"] == "websocket.close":
                return frames

    async def disconnect(self, code: int = 1000, timeout: float = 10) -> None:
        await self.send_input({"type": "websocket.disconnect", "code": code})
        await self.wait(timeout)


def signed_in_headers(user: Any) -> tuple[list[tuple[bytes, bytes]], Client]:
    """Origin, host and session cookie as a browser of `user` sends them, and a client on that
    same session (to log it out). Sync code only."""
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", cookie.encode()),
    ]
    return headers, client


def first_frame(application: Any, path: str, headers: list[tuple[bytes, bytes]]) -> Any:
    """Open a socket on ``path`` (it must be accepted) and return the first frame: a message's
    JSON, or the close frame itself (``{"type": "websocket.close", "code": ...}``). Sync code."""

    async def scenario() -> Any:
        communicator = WebsocketCommunicator(application, path, headers)
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        frame = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return json.loads(frame["text"]) if frame["type"] == "websocket.send" else frame

    return async_to_sync(scenario)()
