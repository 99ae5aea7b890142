"""Client for the wordle environment.

Synchronous use (openenv's clients are async; ``.sync()`` wraps one)::

    from envs.wordle.client import open_wordle_env
    from envs.wordle.models import WordleAction

    with open_wordle_env("http://127.0.0.1:8000") as env:
        result = env.reset(seed=7)
        result = env.step(WordleAction(guess="crane"))
        result.observation.feedback, result.observation.guesses_left, result.reward

Server-side errors (over capacity, guessing in a finished game) surface as
``RuntimeError("Server error: <message> (code: <CODE>)")``.
"""

from __future__ import annotations

from typing import Any, cast

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.sync_client import SyncEnvClient

from envs.wordle.models import WordleAction, WordleObservation, WordleState


class WordleEnv(EnvClient[WordleAction, WordleObservation, WordleState]):
    """Async WebSocket client: one server-side game per client instance."""

    def _step_payload(self, action: WordleAction) -> dict[str, Any]:
        payload: dict[str, Any] = {"guess": action.guess}
        if action.metadata:
            payload["metadata"] = action.metadata
        return payload

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[WordleObservation]:
        obs_data = dict(payload.get("observation") or {})
        obs_data["reward"] = payload.get("reward")
        obs_data["done"] = bool(payload.get("done", False))
        observation = WordleObservation.model_validate(obs_data)
        return StepResult(
            observation=observation,
            reward=observation.reward,
            done=observation.done,
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> WordleState:
        return WordleState.model_validate(payload)


def open_wordle_env(
    base_url: str, **kwargs: Any
) -> SyncEnvClient[WordleAction, WordleObservation, WordleState]:
    """A synchronous wordle client (not yet connected; use it as a context manager)."""
    return cast(
        SyncEnvClient[WordleAction, WordleObservation, WordleState],
        WordleEnv(base_url=base_url, **kwargs).sync(),
    )
