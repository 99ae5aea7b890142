"""The echo server with a broken backend: episodes start, every tool call fails.

Serve with ``uvicorn tests.support.broken_echo:app``. It keeps the bundled echo's action,
schema and ``/envlab`` marker, so it registers with the echo adapter (tool ``echo``)."""

from __future__ import annotations

from typing import Any

from envs.bundled_app import create_bundled_app
from envs.echo.models import EchoAction, EchoObservation, EchoState
from envs.echo.server import ENV_NAME, ENV_VERSION, EchoEnvironment

FAILURE = "the echo backend is down"


class BrokenEchoEnvironment(EchoEnvironment):
    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        raise RuntimeError(FAILURE)


# The bundled echo's app and ``/envlab`` marker (same name and version), on this environment.
app, _ = create_bundled_app(
    BrokenEchoEnvironment, EchoAction, EchoObservation, EchoState, name=ENV_NAME, version=ENV_VERSION
)
