"""Client for the catch environment.

Synchronous use (openenv's clients are async; ``.sync()`` wraps one)::

    from envs.catch.client import open_catch_env
    from envs.catch.models import CatchAction

    with open_catch_env("http://127.0.0.1:8000") as env:
        result = env.reset(seed=3)
        print(result.observation.text)
        result = env.step(CatchAction(direction="left"))
        result.reward, result.done, result.observation.outcome

Server-side errors (over capacity, stepping a finished episode) surface as
``RuntimeError("Server error: <message> (code: <CODE>)")``.
"""

from __future__ import annotations

from envs.catch.models import CatchAction, CatchObservation, CatchState
from envs.typed_client import TypedEnvClient


class CatchEnv(TypedEnvClient[CatchAction, CatchObservation, CatchState]):
    """Async WebSocket client: one server-side environment per client instance."""

    observation_cls = CatchObservation
    state_cls = CatchState


# A synchronous catch client (not yet connected; use it as a context manager).
open_catch_env = CatchEnv.open_sync
