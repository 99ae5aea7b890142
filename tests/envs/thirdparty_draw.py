"""Two third-party classic OpenEnv servers that deal a card at reset: one from the seed, one
that ignores it.

Classic style (a typed ``Action`` with one field, ``guess``) with no envlab marker, so they
register as generic environments. ``seeded_app``'s first observation depends on the seed
alone; ``unseeded_app`` adds a random table id to it (like OpenEnv's chess, whose colour comes
from a uuid), so the completions of one GRPO group start from different observations. Serve
with ``run_env_server("tests.envs.thirdparty_draw:seeded_app")`` (or ``:unseeded_app``).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

SUITS = ("hearts", "spades", "clubs", "diamonds")


class GuessAction(Action):
    guess: str


class DrawObservation(Observation):
    card: str = ""


def _dealt(seed: int | None) -> str:
    rng = random.Random(seed)
    return f"{rng.randint(1, 13)} of {rng.choice(SUITS)}"


class DrawEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    honours_seed = True

    def __init__(self) -> None:
        self._state = State()
        self._card = ""

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> DrawObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._card = _dealt(seed)
        shown = self._card if self.honours_seed else f"{self._card} at table {uuid.uuid4().hex[:8]}"
        return DrawObservation(card=shown)

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> DrawObservation:
        self._state.step_count += 1
        right = action.guess.strip() == self._card
        return DrawObservation(card=self._card, reward=1.0 if right else 0.0, done=True)

    @property
    def state(self) -> State:
        return self._state


class UnseededDrawEnvironment(DrawEnvironment):
    honours_seed = False


seeded_app = create_app(DrawEnvironment, GuessAction, DrawObservation, env_name="draw", max_concurrent_envs=16)
unseeded_app = create_app(
    UnseededDrawEnvironment, GuessAction, DrawObservation, env_name="draw", max_concurrent_envs=16
)
