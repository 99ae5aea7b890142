"""WebSocket /ws/environments/<id>/console/: drive one episode of an environment by hand.

Client -> server, each a JSON object of at most 10 kB:
    {"type": "tools"}
    {"type": "reset", "seed": int | null, "row": {...}}
    {"type": "call", "tool": name, "arguments": {...}}
Server -> client:
    {"type": "status", "message": ...}            while the adapter is being prepared
    {"type": "tools", "tools": [...]}             the adapter's tools, as the model sees them
    {"type": "reset", "observation": text | null, "state": {...}}
    {"type": "result", "tool": ..., "arguments": {...}, "output": text, "state": {...}}
    {"type": "error", "message": ..., ...}        a refused message or a failing environment;
        for a failing tool also "tool", "output" (the text the model would get) and "state".
    {"type": "episode_closed", "message": ...}    the episode was left idle and closed.

Access (webapp.catalog.selectors): the environment's owner, or a user with the permission
catalog.change_environment. Checked at connect, again before every message and every
`recheck_seconds` while idle, so a user who logs out, is deactivated or loses the permission
loses the socket. Close codes, none of which the page retries: 4401 not signed in, 4403
not allowed, 4404 not found (or not visible), 4429 too many consoles open (each holds one
of the server's sessions; webapp.catalog.console_sockets). An error message saying why
comes first, except for 4404.

The adapter is synchronous and blocking: it runs in a thread of this connection's own
(one thread, so one adapter call at a time, always from the same thread), under a timeout.
Channels dispatches one message at a time per connection, so calls never overlap.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from channels.db import database_sync_to_async

from webapp.accounts.socket_auth import socket_user
from webapp.catalog.console import (
    ConsoleRejected,
    ConsoleSession,
    RateLimiter,
    console_parse_call,
    console_parse_message,
    console_parse_reset,
    error_text,
)
from webapp.catalog.console_sockets import (
    console_max_sockets,
    console_socket_claim,
    console_socket_release,
    console_socket_renew,
)
from webapp.catalog.models import Environment
from webapp.catalog.selectors import (
    environment_can_control,
    environment_control_refusal,
    environments_visible_to,
)
from webapp.core.ws import (
    CLOSE_FORBIDDEN,
    CLOSE_NOT_FOUND,
    CLOSE_TOO_MANY,
    CLOSE_UNAUTHENTICATED,
    GuardedConsumer,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


class ConsoleTimeout(RuntimeError):
    pass


@database_sync_to_async
def _console_access(user: Any, environment_id: int) -> tuple[int | None, Environment | None, str]:
    """(close code or None, the environment, why): None means `user` may drive it."""
    environment = environments_visible_to(user=user).filter(pk=environment_id).first()
    if environment is None:
        return CLOSE_NOT_FOUND, None, "no such environment"
    if not environment_can_control(user=user, environment=environment):
        return CLOSE_FORBIDDEN, environment, environment_control_refusal(environment=environment)
    return None, environment, ""


_claim = database_sync_to_async(console_socket_claim)
_renew = database_sync_to_async(console_socket_renew)
_release = database_sync_to_async(console_socket_release)


class EnvironmentConsoleConsumer(GuardedConsumer):
    # No channel layer: the console talks to its own client only, and must keep working
    # when Redis is away. (An alias that is not configured gives a consumer no layer.)
    channel_layer_alias = "envlab-console-no-layer"
    # Building the adapter may import openenv (seconds, the first time) and read the
    # server's schema; a tool call is one round trip to the environment.
    prepare_timeout_s: float = 60.0
    call_timeout_s: float = 30.0
    messages_per_second: float = 20.0
    idle_close_s: float = 300.0
    # How often an idle socket re-checks its user's access and renews its slot (well within
    # the slot's lease).
    recheck_seconds: float = 30.0

    session: ConsoleSession | None = None
    executor: ThreadPoolExecutor | None = None
    limiter: RateLimiter
    idle_task: asyncio.Task[None] | None = None
    slot_id: int | None = None
    environment_id: int = 0
    # Set once access is gone and the socket is being closed: later frames are ignored.
    shut: bool = False

    async def opened(self, user: Any) -> None:
        self.environment_id = int(self.scope["url_route"]["kwargs"]["environment_id"])
        code, environment, why = await _console_access(user, self.environment_id)
        if code is not None or environment is None:
            await self._refuse(code or CLOSE_NOT_FOUND, why)
            return
        slot = await _claim(user=user, environment=environment)
        if slot is None:
            await self._refuse(
                CLOSE_TOO_MANY,
                f"you have {console_max_sockets()} console(s) open already, the most one user "
                "may: close one (each holds one of an environment server's sessions)",
            )
            return
        self.slot_id = slot.pk
        self.start_watch()
        self.limiter = RateLimiter(
            rate=self.messages_per_second, burst=int(self.messages_per_second)
        )
        self.session = ConsoleSession(environment=environment, user=user)
        self.executor = self._new_executor()
        await self.send_json({"type": "status", "message": "connecting…"})
        await self._send_tools()

    # --- access while open ------------------------------------------------------------------

    async def _refuse(self, code: int, message: str) -> None:
        if code != CLOSE_NOT_FOUND:  # "not found" says nothing more than the code
            await self._error(message)
        await self.close(code=code)

    async def _still_allowed(self) -> bool:
        """Re-read the session and the permissions; close the socket when access is gone."""
        user = await socket_user(self.scope)
        if not user.is_authenticated:
            code: int | None = CLOSE_UNAUTHENTICATED
            why = "you were signed out: sign in again to use the console"
        else:
            code, _, why = await _console_access(user, self.environment_id)
        if code is None:
            return True
        await self._shut(code, why)
        return False

    async def _shut(self, code: int, why: str) -> None:
        # Closed for good; `disconnect` gives the episode and the slot back.
        self.shut = True
        self._stop_idle_watch()
        await self._refuse(code, why)

    async def recheck(self) -> bool:
        if self.session is None or self.shut:
            return False
        if not await self._still_allowed():
            return False
        if self.slot_id is not None and not await _renew(connection_id=self.slot_id):
            # The lease ran out (a stalled process) and the row was reclaimed.
            slot = await _claim(user=self.scope["user"], environment=self.session.environment)
            if slot is None:
                await self._shut(CLOSE_TOO_MANY, "this console's slot expired while the "
                                 "most consoles one user may hold were open: close one")
                return False
            self.slot_id = slot.pk
        return True

    # --- messages ---------------------------------------------------------------------------

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        # Overrides the JSON decoding of AsyncJsonWebsocketConsumer: a frame is checked for
        # size and shape before anything is parsed, and bad input is answered, not raised.
        if self.session is None or self.shut:
            return
        self._stop_idle_watch()
        try:
            await self._handle(text_data)
        finally:
            if self.session is not None and not self.shut:
                self.idle_task = asyncio.create_task(self._close_when_idle())

    async def _handle(self, text_data: str | None) -> None:
        if not self.limiter.allow():
            await self._error(f"too many messages: at most {self.messages_per_second:g} a second")
            return
        try:
            # After the rate limit, so a flood costs no database reads.
            if not await self._still_allowed():
                return
            content = console_parse_message(text=text_data)
            handler: Callable[[dict[str, Any]], Any] = getattr(self, f"on_{content['type']}")
            await handler(content)
        except (ConsoleRejected, ConsoleTimeout) as exc:
            await self._error(str(exc))
        except Exception:  # a bug here must not end the connection
            log.exception("console of environment %s failed", self._session().environment.pk)
            await self._error("the console failed on this message; see the server log")

    async def on_ping(self, content: dict[str, Any]) -> None:
        await self.send_json({"type": "pong"})

    async def on_tools(self, content: dict[str, Any]) -> None:
        await self._send_tools()

    async def on_reset(self, content: dict[str, Any]) -> None:
        row = console_parse_reset(content=content)
        session = self._session()
        try:
            answer = await self._in_thread(
                functools.partial(session.reset, row=row), self.prepare_timeout_s
            )
        except (ConsoleRejected, ConsoleTimeout):
            raise
        except Exception as exc:  # the environment's own error: server down, refused reset, ...
            await self.send_json(
                {"type": "error", "message": error_text(exc), "state": session.state()}
            )
            return
        await self.send_json({"type": "reset", **answer})

    async def on_call(self, content: dict[str, Any]) -> None:
        session = self._session()
        if session.adapter_class is None:
            await self._send_tools()
            if session.adapter_class is None:
                return
        tool, arguments = console_parse_call(content=content, tools=session.tools)
        try:
            answer = await self._in_thread(
                functools.partial(session.call, tool=tool, arguments=arguments), self.call_timeout_s
            )
        except ConsoleTimeout as exc:
            await self.send_json({"type": "error", "tool": tool, "message": str(exc)})
            return
        except ConsoleRejected:
            raise
        except Exception as exc:  # what the tool raised is what TRL hands the model
            message = error_text(exc)
            await self.send_json(
                {
                    "type": "error",
                    "tool": tool,
                    "arguments": arguments,
                    "message": message,
                    "output": str({"error": message}),
                    "state": session.state(),
                }
            )
            return
        await self.send_json({"type": "result", "tool": tool, "arguments": arguments, **answer})

    async def _send_tools(self) -> None:
        session = self._session()
        try:
            tools = await self._in_thread(session.bind, self.prepare_timeout_s)
        except Exception as exc:  # unreachable server (generic adapters read its schema), bad kind
            await self._error(f"cannot prepare {session.environment.name}: {error_text(exc)}")
            return
        await self.send_json({"type": "tools", "tools": tools})

    async def _error(self, message: str) -> None:
        await self.send_json({"type": "error", "message": message})

    # --- idle episodes ----------------------------------------------------------------------

    def _stop_idle_watch(self) -> None:
        if self.idle_task is not None:
            self.idle_task.cancel()
            self.idle_task = None

    async def _close_when_idle(self) -> None:
        """An open episode holds one of the server's sessions, which training runs need
        (a server over capacity refuses a run's rollouts): give it back when left idle."""
        await asyncio.sleep(self.idle_close_s)
        session, executor = self.session, self.executor
        if session is None or executor is None or session.adapter is None:
            return
        await asyncio.get_running_loop().run_in_executor(executor, session.close)
        minutes = self.idle_close_s / 60
        await self.send_json(
            {
                "type": "episode_closed",
                "message": f"the episode was closed after {minutes:g} minute(s) without a message, "
                "to give the environment's session back: reset to start again",
            }
        )

    # --- the adapter's thread ---------------------------------------------------------------

    def _session(self) -> ConsoleSession:
        assert self.session is not None
        return self.session

    @staticmethod
    def _new_executor() -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="envlab-console")

    async def _in_thread(self, call: Callable[[], T], timeout: float) -> T:
        assert self.executor is not None
        future = asyncio.get_running_loop().run_in_executor(self.executor, call)
        # asyncio.wait, not wait_for: a TimeoutError raised by the adapter itself is the
        # environment's error, not this timeout.
        done, _ = await asyncio.wait({future}, timeout=timeout)
        if future in done:
            return future.result()
        # The thread is still inside the adapter and cannot be interrupted: leave that
        # adapter to it (closed once the call returns) and go on with a fresh thread.
        stuck_session, stuck_executor = self._session(), self.executor
        self.session = stuck_session.detached()
        self.executor = self._new_executor()
        stuck_executor.submit(stuck_session.close)
        stuck_executor.shutdown(wait=False)
        raise ConsoleTimeout(
            f"the environment did not answer within {timeout:g} s; the episode was abandoned: reset to start again"
        )

    async def disconnect(self, code: int) -> None:
        self._stop_idle_watch()
        self.stop_watch()
        if self.slot_id is not None:
            slot_id, self.slot_id = self.slot_id, None
            try:
                await _release(connection_id=slot_id)
            except Exception as exc:  # the lease expires on its own
                log.warning("releasing console slot %s failed: %s", slot_id, exc)
        session, executor = self.session, self.executor
        self.session = self.executor = None
        if executor is None:
            return
        if session is not None:
            try:
                await asyncio.wait_for(
                    asyncio.get_running_loop().run_in_executor(executor, session.close), 10
                )
            except Exception as exc:  # a hung close: the thread ends when the client gives up
                log.warning("closing the console of %s failed: %s", session.environment.name, exc)
        executor.shutdown(wait=False)
