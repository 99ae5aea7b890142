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

from typing import Any, cast

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.sync_client import SyncEnvClient

from envs.echo.models import EchoAction, EchoObservation, EchoState


class EchoEnv(EnvClient[EchoAction, EchoObservation, EchoState]):
    """Async WebSocket client: one server-side environment per client instance."""

    def _step_payload(self, action: EchoAction) -> dict[str, Any]:
        payload: dict[str, Any] = {"message": action.message}
        if action.metadata:
            payload["metadata"] = action.metadata
        return payload

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[EchoObservation]:
        obs_data = dict(payload.get("observation") or {})
        obs_data["reward"] = payload.get("reward")
        obs_data["done"] = bool(payload.get("done", False))
        observation = EchoObservation.model_validate(obs_data)
        return StepResult(
            observation=observation,
            reward=observation.reward,
            done=observation.done,
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> EchoState:
        return EchoState.model_validate(payload)


def open_echo_env(
    base_url: str, **kwargs: Any
) -> SyncEnvClient[EchoAction, EchoObservation, EchoState]:
    """A synchronous echo client (not yet connected; use it as a context manager)."""
    return cast(
        SyncEnvClient[EchoAction, EchoObservation, EchoState],
        EchoEnv(base_url=base_url, **kwargs).sync(),
    )
