"""The echo server with a price on every move: each step's reward is -1.0, whatever was said.

Serve with ``uvicorn tests.support.penalty_echo:app``. It keeps the bundled echo's action,
schema and ``/envlab`` marker, so it registers with the echo adapter, whose tool the demo
model calls: a real run's episodes then each score -1 per call (the echo adapter keeps the
best step reward, and every step is -1)."""

from __future__ import annotations

from typing import Any

from envs.bundled_app import create_bundled_app
from envs.echo.models import EchoAction, EchoObservation, EchoState
from envs.echo.server import ENV_NAME, ENV_VERSION, EchoEnvironment

PENALTY = -1.0


class PenaltyEchoEnvironment(EchoEnvironment):
    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        observation = super().step(action, timeout_s=timeout_s, **kwargs)
        observation.reward = PENALTY
        return observation


# The bundled echo's app and ``/envlab`` marker (same name and version), on this environment.
app, _ = create_bundled_app(
    PenaltyEchoEnvironment, EchoAction, EchoObservation, EchoState, name=ENV_NAME, version=ENV_VERSION
)
