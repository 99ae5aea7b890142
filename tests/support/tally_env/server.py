"""The tally server (openenv 0.10), with envlab's bundled marker like envs/<key>/server.py."""

from __future__ import annotations

import uuid
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from envs.common import max_concurrent_envs, require_open_episode
from tests.support.tally_env.models import TallyAction, TallyObservation, TallyState

ENV_NAME = "tally"
ENV_VERSION = "0.1.0"


class TallyEnvironment(Environment[TallyAction, TallyObservation, TallyState]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = TallyState()
        self._started = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> TallyObservation:
        self._state = TallyState(episode_id=episode_id or str(uuid.uuid4()), target=4 + (seed or 0) % 5)
        self._started = True
        return self._observation(reward=None)

    def step(self, action: TallyAction, timeout_s: float | None = None, **kwargs: Any) -> TallyObservation:
        state = self._state
        require_open_episode(started=self._started, episode_id=state.episode_id, done=state.done)
        state.total += action.count
        state.step_count += 1
        state.done = state.total >= state.target
        return self._observation(reward=1.0 if state.total == state.target else 0.0)

    @property
    def state(self) -> TallyState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=ENV_NAME, description="Add 1 to 3 until the tally hits the target.",
                                   version=ENV_VERSION, author="envlab tests")

    def _observation(self, reward: float | None) -> TallyObservation:
        state = self._state
        return TallyObservation(
            text=f"Target {state.target}, tally {state.total}.", reward=reward, done=state.done,
            metadata={"episode_id": state.episode_id, "step_count": state.step_count},
        )


app = create_app(TallyEnvironment, TallyAction, TallyObservation, env_name=ENV_NAME,
                 max_concurrent_envs=max_concurrent_envs(), state_cls=TallyState)


@app.get("/envlab", include_in_schema=False)
def envlab_marker() -> dict[str, str]:
    return {"envlab_bundled": ENV_NAME, "version": ENV_VERSION}
