"""Echo environment server (openenv 0.10).

Run with ``python -m uvicorn envs.echo.server:app --host 127.0.0.1 --port 8000`` or
``python -m envs.echo.server --port 8000``. Episodes live on the WebSocket ``/ws``
(one environment per connection, at most ``MAX_CONCURRENT_ENVS`` per process); the
HTTP ``/reset`` and ``/step`` routes build a throwaway environment per request.
"""

from __future__ import annotations

import difflib
from typing import Any

from openenv.core.env_server.interfaces import Environment

from envs.bundled_app import BundledEnvironment, create_bundled_app
from envs.common import episode_id_or_new, require_open_episode, serve
from envs.echo.models import (
    MAX_MESSAGE_CHARS,
    MAX_STEPS,
    EchoAction,
    EchoObservation,
    EchoState,
)

ENV_NAME = "echo"
ENV_VERSION = "0.1.0"


def score(message: str, target: str | None) -> float:
    """Reward for one message: 1.0 exact (after strip), else half the similarity."""
    if target is None:
        return 0.0
    said = message.strip()
    if said == target:
        return 1.0
    return 0.5 * difflib.SequenceMatcher(None, said, target).ratio()


def _instruction(target: str | None) -> str:
    if target is None:
        return f"Say anything; it is echoed back. The episode ends after {MAX_STEPS} steps."
    return (
        f"Repeat exactly: {target}\n"
        f"You have {MAX_STEPS} tries; an exact repeat scores 1.0 and ends the episode."
    )


class EchoEnvironment(BundledEnvironment[EchoState], Environment[EchoAction, EchoObservation, EchoState]):
    """Echoes each message; rewards repeating the reset's ``target`` phrase."""

    NAME, VERSION = ENV_NAME, ENV_VERSION
    DESCRIPTION = (
        "Echoes each message back; with a target phrase, rewards 1.0 for an "
        f"exact repeat and partial credit below 0.5 otherwise ({MAX_STEPS} steps)."
    )

    def __init__(self) -> None:
        super().__init__()
        self._state = EchoState()
        self._started = False

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        target: str | None = None,
        **kwargs: Any,
    ) -> EchoObservation:
        """Start an episode; ``target`` (optional) is the phrase to repeat."""
        if target is not None:
            if not isinstance(target, str):
                raise ValueError(f"target must be a string, got {type(target).__name__}")
            target = target.strip()
            if not target:
                raise ValueError("target must not be empty")
            if len(target) > MAX_MESSAGE_CHARS:
                raise ValueError(f"target longer than {MAX_MESSAGE_CHARS} characters")
        self._state = EchoState(
            episode_id=episode_id_or_new(episode_id), step_count=0, target=target
        )
        self._started = True
        return self._observation(echoed="", reward=None)

    def step(
        self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any
    ) -> EchoObservation:
        """Echo ``action.message`` and score it against the target."""
        state = self._state
        require_open_episode(started=self._started, episode_id=state.episode_id, done=state.done)
        reward = score(action.message, state.target)
        state.step_count += 1
        state.done = reward == 1.0 or state.step_count >= state.max_steps
        return self._observation(echoed=action.message, reward=reward)

    def _observation(self, echoed: str, reward: float | None) -> EchoObservation:
        state = self._state
        return EchoObservation(
            echoed_message=echoed,
            instruction=_instruction(state.target),
            reward=reward,
            done=state.done,
            metadata=self._episode_metadata(state.max_steps),
        )


app, envlab_marker = create_bundled_app(
    EchoEnvironment, EchoAction, EchoObservation, EchoState, name=ENV_NAME, version=ENV_VERSION
)

if __name__ == "__main__":
    serve(app, ENV_NAME)
