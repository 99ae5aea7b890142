"""The async client every bundled OpenEnv server shares: typed pydantic models on the wire.

A bundled client names its three models; actions go out as their fields (metadata only
when set), observations and states come back validated by the same models the server uses.
``open_sync`` gives the synchronous client each bundled package exports as ``open_<name>_env``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar, cast

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import Action, Observation, State
from openenv.core.sync_client import SyncEnvClient

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class TypedEnvClient(EnvClient[ActT, ObsT, StateT], Generic[ActT, ObsT, StateT]):
    observation_cls: ClassVar[type[Observation]]
    state_cls: ClassVar[type[State]]

    @classmethod
    def open_sync(cls, base_url: str, **kwargs: Any) -> SyncEnvClient[ActT, ObsT, StateT]:
        """A synchronous client (not yet connected; use it as a context manager)."""
        return cast(SyncEnvClient[ActT, ObsT, StateT], cls(base_url=base_url, **kwargs).sync())

    def _step_payload(self, action: ActT) -> dict[str, Any]:
        payload: dict[str, Any] = action.model_dump(exclude={"metadata"})
        if action.metadata:
            payload["metadata"] = action.metadata
        return payload

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        obs_data = dict(payload.get("observation") or {})
        obs_data["reward"] = payload.get("reward")
        obs_data["done"] = bool(payload.get("done", False))
        observation: Any = self.observation_cls.model_validate(obs_data)
        return StepResult(
            observation=observation,
            reward=observation.reward,
            done=observation.done,
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> StateT:
        state: Any = self.state_cls.model_validate(payload)
        return state
