"""The echo server with a broken backend: episodes start, every tool call fails.

Serve with ``uvicorn tests.support.broken_echo:app``. It keeps the bundled echo's action,
schema and ``/envlab`` marker, so it registers with the echo adapter (tool ``echo``)."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.http_server import create_app

from envs.common import max_concurrent_envs
from envs.echo.models import EchoAction, EchoObservation, EchoState
from envs.echo.server import ENV_NAME, EchoEnvironment, envlab_marker

FAILURE = "the echo backend is down"


class BrokenEchoEnvironment(EchoEnvironment):
    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        raise RuntimeError(FAILURE)


app = create_app(
    BrokenEchoEnvironment,
    EchoAction,
    EchoObservation,
    env_name=ENV_NAME,
    max_concurrent_envs=max_concurrent_envs(),
    state_cls=EchoState,
)
app.get("/envlab", include_in_schema=False)(envlab_marker)
