"""The FastAPI app every bundled OpenEnv server builds: openenv's app plus envlab's marker."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

from envs.common import max_concurrent_envs


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
