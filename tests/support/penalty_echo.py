"""The echo server with a price on every move: each step's reward is -1.0, whatever was said.

Serve with ``uvicorn tests.support.penalty_echo:app``. It keeps the bundled echo's action,
schema and ``/envlab`` marker, so it registers with the echo adapter, whose tool the demo
model calls: a real run's episodes then each score -1 per call (the echo adapter keeps the
best step reward, and every step is -1)."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.http_server import create_app

from envs.common import max_concurrent_envs
from envs.echo.models import EchoAction, EchoObservation, EchoState
from envs.echo.server import ENV_NAME, EchoEnvironment, envlab_marker

PENALTY = -1.0


class PenaltyEchoEnvironment(EchoEnvironment):
    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        observation = super().step(action, timeout_s=timeout_s, **kwargs)
        observation.reward = PENALTY
        return observation


app = create_app(
    PenaltyEchoEnvironment,
    EchoAction,
    EchoObservation,
    env_name=ENV_NAME,
    max_concurrent_envs=max_concurrent_envs(),
    state_cls=EchoState,
)
app.get("/envlab", include_in_schema=False)(envlab_marker)
