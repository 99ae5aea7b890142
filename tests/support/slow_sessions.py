"""Two third-party classic OpenEnv servers for capacity tests, with no envlab marker (they
register as generic environments and do not read MAX_CONCURRENT_ENVS).

``slow_app`` takes 8 sessions, each of whose environments takes about a second to build (a
real server loading a model or a game engine): a capacity measurement with a short
ENVLAB_PROBE_DEADLINE runs out of time and only finds a lower bound. ``one_session_app`` is
openenv's default, one session (SUPPORTS_CONCURRENT_SESSIONS unset). Serve with
``run_env_server("tests.support.slow_sessions:slow_app")`` (or ``:one_session_app``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

SESSION_SECONDS = 1.0
SLOW_CAPACITY = 8


class CountAction(Action):
    count: int


class CountObservation(Observation):
    text: str = ""


class OneSessionEnvironment(Environment):
    def __init__(self) -> None:
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CountObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return CountObservation(text="count to three")

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        self._state.step_count += 1
        return CountObservation(text=str(action.count), reward=float(action.count == 3), done=True)

    @property
    def state(self) -> State:
        return self._state


class SlowEnvironment(OneSessionEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        time.sleep(SESSION_SECONDS)
        super().__init__()


slow_app = create_app(SlowEnvironment, CountAction, CountObservation, env_name="slow", max_concurrent_envs=SLOW_CAPACITY)
one_session_app = create_app(OneSessionEnvironment, CountAction, CountObservation, env_name="single")
