"""One event loop per process for every OpenEnv client the adapters open.

openenv's `SyncEnvClient` starts (and joins) an event-loop thread per client. Adapters
open a fresh client at every reset, so that thread start and join was most of an
episode's overhead (bench/adapter_overhead.py). Here all clients of a process share one
loop thread, and every call has a timeout: a hung environment server becomes a tool
error, not a training that waits forever.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Coroutine
from typing import Any

CALL_TIMEOUT = float(os.environ.get("ENVLAB_ENV_CALL_TIMEOUT", "120"))
CLOSE_TIMEOUT = 10.0

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None


def _shared_loop() -> asyncio.AbstractEventLoop:
    """The process's loop, started on first use and again in a forked child (threads do not
    survive a fork: a Celery pool child must not wait on its parent's dead loop)."""
    global _loop, _loop_pid
    with _lock:
        if _loop is None or _loop_pid != os.getpid() or not _loop.is_running():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=serve, name="envlab-env-clients", daemon=True).start()
            if not ready.wait(10):
                raise RuntimeError("the environment clients' event loop did not start")
            _loop, _loop_pid = loop, os.getpid()
        return _loop


def run(coro: Coroutine[Any, Any, Any], timeout: float = CALL_TIMEOUT) -> Any:
    future = asyncio.run_coroutine_threadsafe(coro, _shared_loop())
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()
        raise TimeoutError(f"the environment server did not answer within {timeout:g} s") from None


class LoopClient:
    """The synchronous calls the adapters make, on an openenv async `EnvClient`.

    Accepts the async client or its `.sync()` wrapper (whose own loop is then never started).
    It runs the client's own coroutines (`_reset_async`, ...) on the lab's shared loop: the
    public calls pick a loop themselves and lock the client to sync or async use.
    """

    def __init__(self, client: Any) -> None:
        self._async = getattr(client, "async_client", client)

    def connect(self) -> LoopClient:
        run(self._async._connect_async())  # noqa: SLF001 - openenv's coroutine (see the class docstring)
        return self

    def reset(self, **kwargs: Any) -> Any:
        return run(self._async._reset_async(**kwargs))  # noqa: SLF001 - openenv's coroutine (see the class docstring)

    def step(self, action: Any, **kwargs: Any) -> Any:
        return run(self._async._step_async(action, **kwargs))  # noqa: SLF001 - openenv's coroutine (see the class docstring)

    def state(self, timeout: float = CALL_TIMEOUT) -> Any:
        return run(self._async._state_async(), timeout)  # noqa: SLF001 - openenv's coroutine (see the class docstring)

    def close(self) -> None:
        run(self._async._close_async(), CLOSE_TIMEOUT)  # noqa: SLF001 - openenv's coroutine (see the class docstring)

    def close_soon(self) -> None:
        """Close without waiting (from `__del__`); nothing at interpreter exit, where
        starting a loop thread would hang the process."""
        if sys.is_finalizing() or _loop is None or _loop_pid != os.getpid() or not _loop.is_running():
            return
        asyncio.run_coroutine_threadsafe(self._async._close_async(), _loop)  # noqa: SLF001 - openenv's coroutine (see the class docstring)
