"""Helpers shared by the bundled OpenEnv environment servers."""

from __future__ import annotations

import os
import uuid

MAX_CONCURRENT_ENVS_VAR = "MAX_CONCURRENT_ENVS"


def max_concurrent_envs(default: int = 64) -> int:
    """Return the WebSocket session limit for one server process.

    openenv does not read ``MAX_CONCURRENT_ENVS`` itself (its own default is a single
    session), so every bundled app passes this value to ``create_app``. The limit is
    per uvicorn worker process.

    Raises:
        ValueError: if the variable (or ``default``) is not a positive integer.
    """
    raw = os.environ.get(MAX_CONCURRENT_ENVS_VAR, "").strip()
    if not raw:
        value = default
    else:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(
                f"{MAX_CONCURRENT_ENVS_VAR} must be a positive integer, got {raw!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        source = MAX_CONCURRENT_ENVS_VAR if raw else "default"
        raise ValueError(f"{source} must be a positive integer, got {value!r}")
    return value


def serve(app: object, name: str, argv: list[str] | None = None, *, default_port: int = 8000) -> None:
    """`python -m envs.<name>.server [--host H] [--port N]`: serve `app` with uvicorn."""
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description=f"Serve the {name} OpenEnv environment.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=default_port)
    args = parser.parse_args(argv)
    uvicorn.run(app, host=args.host, port=args.port)  # type: ignore[arg-type]  # any ASGI app; typed `object` so callers need no Starlette import


def require_open_episode(*, started: bool, episode_id: str | None, done: bool, error: type[Exception] = RuntimeError) -> None:
    """Refuse a step outside an episode, with the messages clients (and tests) rely on."""
    if not started:
        raise error(
            "No episode in progress: call reset() first "
            "(a restarted server gives a reconnecting client a fresh environment)"
        )
    if done:
        raise error(f"Episode {episode_id} is over: call reset() to start a new one")


def episode_id_or_new(episode_id: str | None) -> str:
    """The episode id a reset asked for, or a fresh one when it gave none (or an empty one);
    every bundled server refuses a non-string id with the same message."""
    if episode_id is not None and not isinstance(episode_id, str):
        raise ValueError("episode_id must be a string")
    return episode_id or str(uuid.uuid4())
