"""Client for the echo environment.

Synchronous use (openenv's clients are async; ``.sync()`` wraps one)::

    from envs.echo.client import EchoEnv
    from envs.echo.models import EchoAction

    with EchoEnv(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(target="hello")
        result = env.step(EchoAction(message="hello"))
        result.reward, result.done, result.observation.metadata["episode_id"]

Server-side errors (over capacity, stepping a finished episode) surface as
``RuntimeError("Server error: <message> (code: <CODE>)")``.
"""

from __future__ import annotations

from envs.echo.models import EchoAction, EchoObservation, EchoState
from envs.typed_client import TypedEnvClient


class EchoEnv(TypedEnvClient[EchoAction, EchoObservation, EchoState]):
    """Async WebSocket client: one server-side environment per client instance."""

    observation_cls = EchoObservation
    state_cls = EchoState


# A synchronous echo client (not yet connected; use it as a context manager).
open_echo_env = EchoEnv.open_sync
