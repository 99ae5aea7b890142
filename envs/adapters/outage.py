"""Environment servers that cannot be reached: which errors say so, how they are retried,
and how long an environment has been out of reach.

One policy for every adapter kind (OpenEnv, Open Reward Standard, Harbor): a reset (or a
rollout's start) that cannot reach its server is retried with capped exponential backoff and
full jitter, each attempt on a fresh session, for as long as the environment has been out of
reach for less than ENVLAB_ENV_OUTAGE_SECONDS. Past it the call raises `EnvironmentUnreachable`,
which the worker turns into an interrupted (resumable) run, never a failed one.

"Unreachable" is the transport failing: refused, reset, timed out, a lost WebSocket, an HTTP
5xx. A real answer (4xx, a refused reset, a server's own error frame) is not retried: it would
say the same again.

The clock (`CLOCK`) is per process, per environment name: it starts at the first failed call
since the last one that got through, and listeners (the worker's alert) hear when an
environment goes out of reach and when it is back.
"""

from __future__ import annotations

import errno
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)

DEFAULT_OUTAGE_SECONDS = 300.0
# Backoff between attempts: 0.5 s doubling to at most 10 s, each drawn in [d/2, d] (jitter: many
# rollouts of a batch, or many workers, must not hammer a server that is starting again in step).
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 10.0

_UNREACHABLE_ERRNOS = frozenset({
    errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE, errno.ETIMEDOUT,
    errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ENETDOWN, errno.EHOSTDOWN,
})
# Exception class names of the client libraries (websockets, httpx, aiohttp, h11) that mean the
# transport failed, matched by name so that this module imports none of them.
_TRANSPORT_CLASS_NAMES = frozenset({
    "ConnectionClosed", "ConnectionClosedError", "InvalidMessage", "ConnectError", "ConnectTimeout",
    "ReadError", "ReadTimeout", "WriteError", "WriteTimeout", "PoolTimeout", "RemoteProtocolError",
    "ServerDisconnectedError", "ClientConnectorError", "ClientOSError", "RemoteDisconnected",
    "IncompleteRead", "TimeoutException", "NetworkError", "TransportError", "MaxRetriesError",
    "HeartbeatTimeoutError",
})

T = TypeVar("T")


class EnvironmentUnreachable(ConnectionError):
    """An environment server stayed out of reach for ENVLAB_ENV_OUTAGE_SECONDS: the run stops
    interrupted, and resumes from its last checkpoint once the server is back."""

    def __init__(self, message: str, *, env_name: str, seconds: float, cause: str) -> None:
        super().__init__(message)
        self.env_name = env_name
        self.seconds = seconds
        self.cause = cause


class OutageWaitStopped(EnvironmentUnreachable):
    """The wait for an environment was given up because the run is stopping (a cancel, a
    lost lease): the worker ends the run as that stop says."""


def _status_code(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (urllib's HTTPError, httpx's HTTPStatusError,
    websockets' InvalidStatus, the openreward SDK's errors), or None."""
    for holder in (exc, getattr(exc, "response", None)):
        for name in ("status_code", "code", "status"):
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                return value
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it was raised from, outermost first (a context `raise ... from None`
    suppressed is not followed)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def _transport_failure(exc: BaseException, *, root: bool) -> bool:
    """Whether `exc` is the transport failing. A bare ConnectionError (no errno: openenv's
    wrapper of whatever its connect raised) says so only where nothing caused it."""
    if isinstance(exc, OSError) and exc.errno in _UNREACHABLE_ERRNOS:
        return True
    if isinstance(exc, TimeoutError | EOFError):  # EOFError: asyncio's IncompleteReadError, a cut stream
        return True
    if any(cls.__name__ in _TRANSPORT_CLASS_NAMES for cls in type(exc).__mro__):
        return True
    return root and isinstance(exc, ConnectionError)


def unreachable(exc: BaseException) -> str:
    """Why `exc` says the server could not be reached ("" when it is a real answer).

    Decided along what the failure was raised from: openenv wraps a refused connect in a
    ConnectionError whose cause is the OSError, and a refusal of the outbound rules (a
    ValueError) or an HTTP 403 on the WebSocket upgrade in the same ConnectionError. An HTTP 4xx
    anywhere in the chain is an answer, a 5xx an outage."""
    links = list(_chain(exc))
    for link in links:
        status = _status_code(link)
        if status is not None and 400 <= status <= 499:
            return ""  # the server answered: a retry would hear the same
        if status is not None and 500 <= status <= 599:
            return f"HTTP {status}"
    if not any(_transport_failure(link, root=link is links[-1]) for link in links):
        return ""
    return f"{type(exc).__name__}: {exc}"[:300]


def outage_limit() -> float:
    """ENVLAB_ENV_OUTAGE_SECONDS from the settings (webapp/settings/base.py parses it); the
    default where Django is not configured (scripts, benchmarks)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        return float(getattr(settings, "ENVLAB_ENV_OUTAGE_SECONDS", DEFAULT_OUTAGE_SECONDS))
    except ImproperlyConfigured:
        return DEFAULT_OUTAGE_SECONDS


def backoff_delays(
    *, first: float = FIRST_DELAY_S, cap: float = MAX_DELAY_S, rng: random.Random | None = None
) -> Iterator[float]:
    """Capped exponential backoff with jitter: the n-th delay is drawn in [d/2, d], d = min(cap, first * 2^n)."""
    draw = rng or random.Random()
    delay = first
    while True:
        yield draw.uniform(delay / 2, delay)
        delay = min(cap, delay * 2)


@dataclass
class _Down:
    since: float  # time.monotonic() of the first failed call
    since_wall: float  # time.time() of it, for messages
    cause: str


Listener = Callable[[str, bool, str], None]  # (environment, reachable now, message)


class OutageClock:
    """How long each environment has been out of reach, in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down: dict[str, _Down] = {}
        self._listeners: list[Listener] = []
        self._waiters = 0
        self._stops: list[Callable[[], bool]] = []

    @contextmanager
    def waiting(self, stop: Callable[[], bool] | None = None) -> Iterator[None]:
        """Calls made meanwhile wait out an outage (training and its warm-up). Elsewhere (the
        web app's try-it console, evaluations, dry runs) a call is tried once, as before: a
        person is waiting on it, and a web request must not hang for minutes. `stop`: says
        when to give the wait up (the run was cancelled), checked between attempts."""
        with self._lock:
            self._waiters += 1
            if stop is not None:
                self._stops.append(stop)
        try:
            yield
        finally:
            with self._lock:
                self._waiters -= 1
                if stop is not None:
                    self._stops.remove(stop)

    def stopping(self) -> bool:
        with self._lock:
            stops = list(self._stops)
        return any(_asks(stop) for stop in stops)

    @property
    def armed(self) -> bool:
        return self._waiters > 0

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(env, reachable, message)` when an environment goes out of reach and
        when it is back; returns the function that unsubscribes it."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def failed(self, env: str, cause: str) -> float:
        """A call to `env` could not reach it; returns the seconds it has been out of reach."""
        now = time.monotonic()
        with self._lock:
            down = self._down.get(env)
            first = down is None
            if down is None:
                down = self._down[env] = _Down(since=now, since_wall=time.time(), cause=cause)
            else:
                down.cause = cause
            listeners = list(self._listeners) if first else []
        if first:
            log.warning("environment %s is unreachable: %s", env, cause)
        for listener in listeners:
            _tell(listener, env, False, f"environment '{env}' is unreachable ({cause}); retrying")
        return now - down.since

    def reached(self, env: str) -> None:
        """A call to `env` got through: its outage, if any, is over."""
        with self._lock:
            down = self._down.pop(env, None)
            listeners = list(self._listeners) if down is not None else []
        if down is None:
            return
        seconds = time.monotonic() - down.since
        log.warning("environment %s is back after %.1f s", env, seconds)
        for listener in listeners:
            _tell(listener, env, True, f"environment '{env}' is reachable again after {seconds:.1f} s")

    def down_for(self, env: str) -> float | None:
        with self._lock:
            down = self._down.get(env)
        return None if down is None else time.monotonic() - down.since

    def clear(self) -> None:
        with self._lock:
            self._down.clear()


def _asks(stop: Callable[[], bool]) -> bool:
    try:
        return bool(stop())
    except Exception:  # a broken check must not end an episode
        log.exception("outage stop check failed")
        return False


def _tell(listener: Listener, env: str, reachable: bool, message: str) -> None:
    try:
        listener(env, reachable, message)
    except Exception:  # an alert that cannot be recorded must not end an episode
        log.exception("outage listener failed")


CLOCK = OutageClock()


def call_with_retry(
    attempt: Callable[[], T],
    *,
    env: str,
    what: str,
    clock: OutageClock = CLOCK,
    limit: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    delays: Iterator[float] | None = None,
) -> T:
    """`attempt()` until it gets through, where the clock is `waiting` (else once). An unreachable server (`unreachable`) is retried after
    a backoff delay while `env` has been out of reach for less than `limit` seconds
    (ENVLAB_ENV_OUTAGE_SECONDS); past it, `EnvironmentUnreachable`. Any other error is raised at
    once. `attempt` must start afresh (a new session) each time it is called."""
    if not clock.armed:
        return attempt()
    limit = outage_limit() if limit is None else limit
    waits = delays or backoff_delays()
    tries = 0
    while True:
        tries += 1
        try:
            result = attempt()
        except EnvironmentUnreachable:
            raise
        except Exception as exc:
            cause = unreachable(exc)
            if not cause:
                raise
            seconds = clock.failed(env, cause)
            if seconds >= limit:
                raise EnvironmentUnreachable(
                    f"environment '{env}' has been unreachable for {seconds:.0f} s "
                    f"(ENVLAB_ENV_OUTAGE_SECONDS is {limit:g}): {what} failed {tries} time(s), last with {cause}",
                    env_name=env, seconds=seconds, cause=cause,
                ) from exc
            delay = min(next(waits), max(0.0, limit - seconds))
            log.info("%s: %s failed (%s); attempt %d in %.2f s", env, what, cause, tries + 1, delay)
            _stop_if_asked(clock, env, what, seconds, cause, exc)
            sleep(delay)
            _stop_if_asked(clock, env, what, seconds, cause, exc)
            continue
        clock.reached(env)
        return result


def _stop_if_asked(
    clock: OutageClock, env: str, what: str, seconds: float, cause: str, exc: BaseException
) -> None:
    if clock.stopping():
        raise OutageWaitStopped(
            f"stopped waiting for environment '{env}' ({what}, unreachable for {seconds:.0f} s, last with "
            f"{cause}): the run is stopping",
            env_name=env, seconds=seconds, cause=cause,
        ) from exc


def outage_of(exc: BaseException) -> EnvironmentUnreachable | None:
    """The EnvironmentUnreachable in `exc`'s chain (TRL or a router may wrap it), or None."""
    for link in _chain(exc):
        if isinstance(link, EnvironmentUnreachable):
            return link
    return None


def note_unreachable(env: str, exc: BaseException, *, clock: OutageClock = CLOCK) -> str:
    """After a failed tool call: start (or extend) `env`'s outage if `exc` says it is out of
    reach; returns the cause ("" when it answered)."""
    cause = unreachable(exc)
    if cause:
        clock.failed(env, cause)
    return cause

