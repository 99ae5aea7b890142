"""What every bundled OpenEnv server shares: its environment's state and metadata
(`BundledEnvironment`) and its FastAPI app, openenv's app plus envlab's marker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from fastapi import FastAPI
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State

from envs.common import max_concurrent_envs

StateT = TypeVar("StateT", bound=State)


class BundledEnvironment(Generic[StateT]):
    """Mixed in before openenv's ``Environment`` (or ``MCPEnvironment``) by every bundled
    environment: it keeps its episode in ``self._state`` (all state is per instance, so
    sessions run concurrently) and describes itself with the class's ``NAME``,
    ``VERSION`` and ``DESCRIPTION``."""

    SUPPORTS_CONCURRENT_SESSIONS: bool = True
    NAME: ClassVar[str]
    VERSION: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    _state: StateT

    @property
    def state(self) -> StateT:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=self.NAME, description=self.DESCRIPTION, version=self.VERSION, author="envlab"
        )

    def _episode_metadata(self, max_steps: int) -> dict[str, Any]:
        """What every observation's ``metadata`` starts with."""
        state = self._state
        return {"episode_id": state.episode_id, "step_count": state.step_count, "max_steps": max_steps}


def create_bundled_app(
    env: Callable[[], Environment],
    action_cls: type[Action],
    observation_cls: type[Observation],
    state_cls: type[State],
    *,
    name: str,
    version: str,
) -> tuple[FastAPI, Callable[[], dict[str, str]]]:
    """openenv's app for a bundled environment (its session limit from
    ``MAX_CONCURRENT_ENVS``) with the ``/envlab`` marker route; returns the app and the
    marker view, which test servers built on a bundled environment register too."""
    app = create_app(
        env,
        action_cls,
        observation_cls,
        env_name=name,
        max_concurrent_envs=max_concurrent_envs(),
        state_cls=state_cls,
    )

    def envlab_marker() -> dict[str, str]:
        """envlab's marker: this is one of its bundled servers, so the bundled adapter
        applies (envs.registry.bundled_match also checks the ``/schema`` action)."""
        return {"envlab_bundled": name, "version": version}

    app.get("/envlab", include_in_schema=False)(envlab_marker)
    return app, envlab_marker
