"""The environment console: its WebSocket consumer against a real echo server (its page is
tests/webapp/test_console_page.py, its pure parts tests/webapp/test_console_parts.py).

The consumer runs in a WebSocket communicator (asgiref's ApplicationCommunicator) behind the same middleware as
webapp.asgi (origin check, session auth), routed by webapp.catalog.routing. The page is
served through a URLconf of this module, which adds webapp.catalog.console_urls to the
project's until webapp/urls.py includes it (the duplicate is harmless after that).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.conf import settings
from django.test import Client
from django.urls import include, path
from django.utils import timezone

from tests.envs.servers import free_port, run_env_server
from tests.factories import EnvironmentFactory
from tests.support.websocket import WebsocketCommunicator, signed_in_headers
from tests.webapp.pages import REFUSAL
from webapp.catalog.consumers import EnvironmentConsoleConsumer
from webapp.catalog.models import ConsoleConnection, Environment
from webapp.catalog.routing import websocket_urlpatterns
from webapp.catalog.services import environment_register

urlpatterns = [
    path("", include("webapp.urls")),
    path("", include("webapp.catalog.console_urls")),
]

APPLICATION = AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
# The first reset imports openenv (several seconds, once per process).
SLOW = 60
ECHO_TOOL = {
    "name": "echo",
    "description": "Echo a message back to the caller.",
    "parameters": {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "The message to echo back."}},
        "required": ["message"],
    },
}
FRESH_STATE = {
    "done": False, "lost": False, "lost_reason": "", "reward": 0.0, "rewards": [], "tool_calls": 0, "tool_failures": 0,
}
db = pytest.mark.django_db(transaction=True)


# --- fixtures and helpers --------------------------------------------------------------------


@pytest.fixture
def echo_env(echo_url, owner) -> Environment:
    # 'echo' as the lab's own entry is named (reserved for it: webapp.catalog.names).
    return environment_register(owner=owner, name="echo", base_url=echo_url, allow_reserved_name=True)


def _headers(user: Any = None) -> list[tuple[bytes, bytes]]:
    """Origin and host as a browser sends them, and the session cookie of `user` (sync code only)."""
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if user is not None:
        client = Client()
        client.force_login(user)
        cookie = (
            f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        )
        headers.append((b"cookie", cookie.encode()))
    return headers


def _console(
    environment_id: int, headers: list[tuple[bytes, bytes]], application: Any = APPLICATION
) -> WebsocketCommunicator:
    return WebsocketCommunicator(
        application, f"/ws/environments/{environment_id}/console/", headers=headers
    )


async def _open(communicator: WebsocketCommunicator) -> list[dict[str, Any]]:
    """Connect and read the greeting: a status line, then the tools."""
    connected, _ = await communicator.connect(timeout=SLOW)
    assert connected
    return [await communicator.receive_json_from(timeout=SLOW) for _ in range(2)]


async def _ask(
    communicator: WebsocketCommunicator, message: Any, timeout: float = SLOW
) -> dict[str, Any]:
    if isinstance(message, str):
        await communicator.send_to(text_data=message)
    else:
        await communicator.send_json_to(message)
    return await communicator.receive_json_from(timeout=timeout)


def _router(consumer: type) -> Any:
    """The console routed to `consumer` (a subclass with other limits), behind the same middleware."""
    route = path("ws/environments/<int:environment_id>/console/", consumer.as_asgi())
    return AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter([route])))


def _sync(scenario):
    return async_to_sync(scenario)()


# --- access -----------------------------------------------------------------------------------


@db
def test_anonymous_is_closed_with_4401(echo_env):
    anonymous = _headers()

    async def scenario():
        communicator = _console(echo_env.pk, anonymous)
        connected, _ = await communicator.connect(timeout=5)
        closed = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return connected, closed

    connected, closed = _sync(scenario)
    assert connected is True  # accepted, then closed with a code the page does not retry
    assert closed == {"type": "websocket.close", "code": 4401}


@db
def test_unknown_environment_is_closed_with_4404(echo_env, owner):
    owner_headers = _headers(owner)

    async def scenario():
        communicator = _console(echo_env.pk + 1000, owner_headers)
        await communicator.connect(timeout=5)
        closed = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return closed

    assert _sync(scenario) == {"type": "websocket.close", "code": 4404}


@db
@pytest.mark.parametrize("persona", ["owner", "operator"])
def test_the_owner_and_an_operator_get_the_tools(request, echo_env, persona):
    """The owner, and a user with catalog.change_environment, drive an environment."""
    headers = _headers(request.getfixturevalue(persona))

    async def scenario():
        communicator = _console(echo_env.pk, headers)
        greeting = await _open(communicator)
        again = await _ask(communicator, {"type": "tools"})
        await communicator.disconnect()
        return greeting, again

    greeting, again = _sync(scenario)
    assert greeting == [
        {"type": "status", "message": "connecting…"},
        {"type": "tools", "tools": [ECHO_TOOL]},
    ]
    assert again == {"type": "tools", "tools": [ECHO_TOOL]}


@pytest.fixture
def shared_env(echo_url, owner) -> Environment:
    return EnvironmentFactory(
        owner=owner, name="shared-echo", base_url=echo_url, metadata={"name": "echo"}, shared=True,
    )


async def _closing(communicator: WebsocketCommunicator) -> list[Any]:
    """Connect and read what comes until the socket is closed (an accepted, refused socket)."""
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    frames = await communicator.receive_until_close(timeout=5)
    await communicator.disconnect()
    return frames


@db
@pytest.mark.parametrize("persona", ["outsider", "staff"])
def test_others_are_closed_with_4404_or_4403_and_hold_no_slot(
    request, echo_env, shared_env, persona
):
    """Staff status alone gives nothing: catalog.change_environment does."""
    headers = _headers(request.getfixturevalue(persona))

    async def scenario():
        hidden = await _closing(_console(echo_env.pk, headers))
        seen = await _closing(_console(shared_env.pk, headers))
        return hidden, seen

    hidden, seen = _sync(scenario)
    assert hidden == [{"type": "websocket.close", "code": 4404}]  # as if it did not exist
    assert seen == [
        {"type": "error", "message": REFUSAL.format(name="shared-echo")},
        {"type": "websocket.close", "code": 4403},
    ]
    assert ConsoleConnection.objects.count() == 0


@db
def test_a_user_holds_at_most_the_configured_number_of_consoles(echo_env, owner, settings):
    settings.ENVLAB_CONSOLE_MAX_SOCKETS = 2
    headers = _headers(owner)

    async def scenario():
        first, second = _console(echo_env.pk, headers), _console(echo_env.pk, headers)
        await _open(first)
        await _open(second)
        held = await database_sync_to_async(ConsoleConnection.objects.count)()
        third = await _closing(_console(echo_env.pk, headers))
        await first.disconnect()
        after_close = _console(echo_env.pk, headers)
        greeting = await _open(after_close)
        await second.disconnect()
        await after_close.disconnect()
        return held, third, greeting

    held, third, greeting = _sync(scenario)
    assert held == 2
    assert third == [
        {
            "type": "error",
            "message": "you have 2 console(s) open already, the most one user may: close one "
            "(each holds one of an environment server's sessions)",
        },
        {"type": "websocket.close", "code": 4429},
    ]
    assert greeting[1] == {"type": "tools", "tools": [ECHO_TOOL]}
    assert ConsoleConnection.objects.count() == 0  # every slot given back on disconnect


@db
def test_slots_count_across_processes_and_expire(echo_env, owner, settings):
    """Rows of another web process count; rows of one that died (expired) do not."""
    settings.ENVLAB_CONSOLE_MAX_SOCKETS = 1
    headers = _headers(owner)
    elsewhere = ConsoleConnection.objects.create(
        user=owner, environment=echo_env, expires_at=timezone.now() + timedelta(seconds=60)
    )

    async def scenario():
        refused = await _closing(_console(echo_env.pk, headers))
        await database_sync_to_async(
            ConsoleConnection.objects.filter(pk=elsewhere.pk).update
        )(expires_at=timezone.now() - timedelta(seconds=1))
        communicator = _console(echo_env.pk, headers)
        greeting = await _open(communicator)
        rows = await database_sync_to_async(
            lambda: list(ConsoleConnection.objects.values_list("pk", flat=True))
        )()
        await communicator.disconnect()
        return refused, greeting, rows

    refused, greeting, rows = _sync(scenario)
    assert refused[-1] == {"type": "websocket.close", "code": 4429}
    assert greeting[1]["type"] == "tools"
    assert elsewhere.pk not in rows and len(rows) == 1  # the expired row was cleared


def _log_out(client: Client) -> None:
    assert client.post("/logout/").status_code == 302


def _deactivate(user: Any) -> None:
    type(user).objects.filter(pk=user.pk).update(is_active=False)


def _revoke_permissions(user: Any) -> None:
    user.user_permissions.clear()


@db
@pytest.mark.parametrize(
    ("persona", "lose_access", "code", "message"),
    [
        ("owner", "log_out", 4401, "you were signed out: sign in again to use the console"),
        ("owner", "deactivate", 4401, "you were signed out: sign in again to use the console"),
        ("operator", "revoke", 4404, None),
    ],
)
def test_losing_access_closes_an_open_console_at_the_next_message(
    request, echo_env, persona, lose_access, code, message
):
    user = request.getfixturevalue(persona)
    headers, client = signed_in_headers(user)
    lose = {
        "log_out": lambda: _log_out(client),
        "deactivate": lambda: _deactivate(user),
        "revoke": lambda: _revoke_permissions(user),
    }[lose_access]

    async def scenario():
        communicator = _console(echo_env.pk, headers)
        await _open(communicator)
        before = await _ask(communicator, {"type": "ping"})
        await database_sync_to_async(lose)()
        await communicator.send_json_to({"type": "ping"})
        frames = await communicator.receive_until_close(timeout=5)
        await communicator.disconnect()
        return before, frames

    before, frames = _sync(scenario)
    assert before == {"type": "pong"}
    expected = [{"type": "websocket.close", "code": code}]
    if message:
        expected.insert(0, {"type": "error", "message": message})
    assert frames == expected
    assert ConsoleConnection.objects.count() == 0


@db
def test_an_idle_console_is_closed_when_its_user_logs_out(echo_env, owner):
    class Watchful(EnvironmentConsoleConsumer):
        recheck_seconds = 0.2

    headers, client = signed_in_headers(owner)

    async def scenario():
        communicator = _console(echo_env.pk, headers, _router(Watchful))
        await _open(communicator)
        await database_sync_to_async(_log_out)(client)
        error = await communicator.receive_json_from(timeout=5)
        closed = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return error, closed

    error, closed = _sync(scenario)
    assert error == {"type": "error", "message": "you were signed out: sign in again to use the console"}
    assert closed == {"type": "websocket.close", "code": 4401}
    assert ConsoleConnection.objects.count() == 0


# --- an episode -------------------------------------------------------------------------------


@db
def test_reset_echo_reward_and_game_over(echo_env, owner):
    owner_headers = _headers(owner)

    async def scenario():
        communicator = _console(echo_env.pk, owner_headers)
        await _open(communicator)
        answers = [
            await _ask(communicator, {"type": "reset", "seed": 7, "row": {"target": "hello"}}),
            await _ask(
                communicator, {"type": "call", "tool": "echo", "arguments": {"message": "hello"}}
            ),
            await _ask(
                communicator, {"type": "call", "tool": "echo", "arguments": {"message": "again"}}
            ),
        ]
        await communicator.disconnect()
        return answers

    reset, result, over = _sync(scenario)
    assert reset == {"type": "reset", "observation": None, "state": FRESH_STATE}
    assert result == {
        "type": "result",
        "tool": "echo",
        "arguments": {"message": "hello"},
        "output": "hello",
        "state": {
            "done": True, "lost": False, "lost_reason": "", "reward": 1.0, "rewards": [1.0], "tool_calls": 1,
            "tool_failures": 0,
        },
    }
    # The adapter refuses a step after the end, as it would in training.
    assert over == {
        "type": "error",
        "tool": "echo",
        "arguments": {"message": "again"},
        "message": "Game over.",
        "output": "{'error': 'Game over.'}",
        "state": {
            "done": True, "lost": False, "lost_reason": "", "reward": 1.0, "rewards": [1.0], "tool_calls": 1,
            "tool_failures": 0,
        },
    }


@db
def test_refused_messages_leave_the_episode_untouched(echo_env, owner):
    too_big = json.dumps({"type": "call", "tool": "echo", "arguments": {"message": "x" * 11_000}})

    owner_headers = _headers(owner)

    async def scenario():
        communicator = _console(echo_env.pk, owner_headers)
        await _open(communicator)
        before = await _ask(
            communicator, {"type": "call", "tool": "echo", "arguments": {"message": "hi"}}
        )
        await _ask(communicator, {"type": "reset", "seed": None, "row": {"target": "hello"}})
        refused = [
            await _ask(
                communicator, {"type": "call", "tool": "shout", "arguments": {"message": "hi"}}
            ),
            await _ask(communicator, {"type": "call", "tool": "echo", "arguments": {"message": 5}}),
            await _ask(communicator, {"type": "call", "tool": "echo", "arguments": {"text": "hi"}}),
            await _ask(communicator, {"type": "call", "tool": "echo", "arguments": {}}),
            await _ask(communicator, {"type": "call", "tool": "echo", "arguments": ["hi"]}),
            await _ask(communicator, {"type": "call", "tool": "_close", "arguments": {}}),
            await _ask(communicator, {"type": "reset", "seed": "7"}),
            await _ask(
                communicator, {"type": "reset", "seed": 1, "row": {"target": "x"}, "extra": 1}
            ),
            await _ask(communicator, {"type": "launch"}),
            await _ask(communicator, "not json"),
            await _ask(communicator, too_big),
        ]
        after = await _ask(
            communicator, {"type": "call", "tool": "echo", "arguments": {"message": "hello"}}
        )
        await communicator.disconnect()
        return before, refused, after

    before, refused, after = _sync(scenario)
    assert before == {"type": "error", "message": "no episode yet: reset first"}
    assert [answer["message"] for answer in refused] == [
        "unknown tool 'shout': this environment's tools are echo",
        "'message' must be of type string, got 5",
        "echo() has no parameter(s) 'text'; its parameters are: message",
        "echo() needs a value for 'message'",
        "arguments must be a JSON object of parameter names to values",
        "unknown tool '_close': this environment's tools are echo",
        "seed must be a whole number or null",
        "unexpected field(s) in a 'reset' message: 'extra'",
        "unknown message type 'launch': expected one of tools, ping, reset, call",
        "message is not valid JSON",
        "message larger than 10 kB",
    ]
    assert all(answer == {"type": "error", "message": answer["message"]} for answer in refused)
    # None of them reached the environment: the first real call is still call 1, and wins.
    assert after["type"] == "result"
    assert after["state"] == {
        "done": True,
        "lost": False,
        "lost_reason": "",
        "reward": 1.0,
        "rewards": [1.0],
        "tool_calls": 1,
        "tool_failures": 0,
    }


@db
def test_unreachable_server_is_an_error_message(owner):
    dead = EnvironmentFactory(
        owner=owner,
        name="dead",
        base_url=f"http://127.0.0.1:{free_port()}",
        metadata={"name": "echo", "style": "bundled", "adapter": "echo"},
        status="healthy",
    )

    owner_headers = _headers(owner)

    async def scenario():
        communicator = _console(dead.pk, owner_headers)
        await _open(communicator)
        failed = await _ask(communicator, {"type": "reset", "seed": 1, "row": {}})
        still_there = await _ask(communicator, {"type": "ping"})
        await communicator.disconnect()
        return failed, still_there

    failed, still_there = _sync(scenario)
    assert failed["type"] == "error"
    assert failed["message"]  # the client library's own words (connection refused)
    assert failed["state"] == FRESH_STATE
    assert still_there == {"type": "pong"}


@db
def test_a_slow_environment_times_out_and_the_console_goes_on(echo_env, owner):
    class Impatient(EnvironmentConsoleConsumer):
        call_timeout_s = 1e-6  # no round trip to a server is this fast

    application = _router(Impatient)

    owner_headers = _headers(owner)

    async def scenario():
        communicator = _console(echo_env.pk, owner_headers, application)
        await _open(communicator)
        await _ask(communicator, {"type": "reset", "seed": 1, "row": {"target": "hello"}})
        answers = [
            await _ask(
                communicator, {"type": "call", "tool": "echo", "arguments": {"message": "hello"}}
            ),
            await _ask(
                communicator, {"type": "call", "tool": "echo", "arguments": {"message": "hello"}}
            ),
            await _ask(communicator, {"type": "reset", "seed": 2, "row": {"target": "hello"}}),
        ]
        await communicator.disconnect()
        return answers

    timed_out, abandoned, reset = _sync(scenario)
    assert timed_out == {
        "type": "error",
        "tool": "echo",
        "message": "the environment did not answer within 1e-06 s; the episode was abandoned: reset to start again",
    }
    assert abandoned == {"type": "error", "message": "no episode yet: reset first"}
    assert reset == {"type": "reset", "observation": None, "state": FRESH_STATE}


@db
def test_an_idle_episode_is_closed(echo_env, owner):
    class Hasty(EnvironmentConsoleConsumer):
        idle_close_s = 0.3

    owner_headers = _headers(owner)

    async def scenario():
        communicator = _console(echo_env.pk, owner_headers, _router(Hasty))
        await _open(communicator)
        await _ask(communicator, {"type": "reset", "seed": 1, "row": {"target": "hello"}})
        closed = await communicator.receive_json_from(timeout=5)
        call = {"type": "call", "tool": "echo", "arguments": {"message": "hello"}}
        after = await _ask(communicator, call)
        await communicator.disconnect()
        return closed, after

    closed, after = _sync(scenario)
    assert closed == {
        "type": "episode_closed",
        "message": "the episode was closed after 0.005 minute(s) without a message, "
        "to give the environment's session back: reset to start again",
    }
    assert after == {"type": "error", "message": "no episode yet: reset first"}


@pytest.fixture
def single_session_env(owner) -> Iterator[Environment]:
    with run_env_server("envs.echo.server:app", env={"MAX_CONCURRENT_ENVS": "1"}) as url:
        yield environment_register(owner=owner, name="echo-one", base_url=url, capacity=1)


@db
def test_disconnect_gives_the_session_back(single_session_env, owner, operator):
    env = single_session_env

    owner_headers = _headers(owner)
    operator_headers = _headers(operator)

    async def scenario():
        first, second = _console(env.pk, owner_headers), _console(env.pk, operator_headers)
        await _open(first)
        await _open(second)
        held = await _ask(first, {"type": "reset", "seed": 1, "row": {}})
        refused = await _ask(second, {"type": "reset", "seed": 1, "row": {}})
        await first.disconnect()
        for _ in range(25):  # the server frees the slot once it sees the socket close
            retried = await _ask(second, {"type": "reset", "seed": 1, "row": {}})
            if retried["type"] == "reset":
                break
            await asyncio.sleep(0.2)
        await second.disconnect()
        return held, refused, retried

    held, refused, retried = _sync(scenario)
    assert held["type"] == "reset"
    assert refused["type"] == "error"
    assert "CAPACITY_REACHED" in refused["message"]
    assert retried == {"type": "reset", "observation": None, "state": FRESH_STATE}


@db
def test_a_flood_is_refused_past_twenty_a_second(echo_env, owner, monkeypatch):
    # The bucket's clock stands still during the flood and moves on when told: on a loaded
    # machine the real clock refills the bucket while the 25 messages are handled.
    import webapp.catalog.consumers as consumers

    now = [1000.0]
    real = consumers.RateLimiter
    monkeypatch.setattr(consumers, "RateLimiter", lambda **kw: real(**kw, clock=lambda: now[0]))
    owner_headers = _headers(owner)

    async def scenario():
        communicator = _console(echo_env.pk, owner_headers)
        await _open(communicator)
        for _ in range(25):
            await communicator.send_json_to({"type": "ping"})
        answers = [await communicator.receive_json_from(timeout=5) for _ in range(25)]
        now[0] += 0.2  # four tokens come back
        later = await _ask(communicator, {"type": "ping"})
        await communicator.disconnect()
        return answers, later

    answers, later = _sync(scenario)
    assert answers[:20] == [{"type": "pong"}] * 20
    assert answers[20:] == [{"type": "error", "message": "too many messages: at most 20 a second"}] * 5
    assert later == {"type": "pong"}
