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

from envs.typed_client import TypedEnvClient
from envs.wordle.models import WordleAction, WordleObservation, WordleState


class WordleEnv(TypedEnvClient[WordleAction, WordleObservation, WordleState]):
    """Async WebSocket client: one server-side game per client instance."""

    observation_cls = WordleObservation
    state_cls = WordleState


# A synchronous wordle client (not yet connected; use it as a context manager).
open_wordle_env = WordleEnv.open_sync
