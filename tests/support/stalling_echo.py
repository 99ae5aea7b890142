"""The bundled echo server, with a switch that stalls one tool call: a test that must kill the
server while a call is in flight (not between steps) arms it and waits for the call to start.

Serve with ``uvicorn tests.support.stalling_echo:app`` and ``STALL_DIR`` set to a folder. While
``<STALL_DIR>/arm`` exists, the next step removes it, writes ``<STALL_DIR>/stalled`` and sleeps
``STALL_SECONDS`` (default 3) before answering. It keeps the echo's action, schema and
``/envlab`` marker, so it registers with the echo adapter."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from openenv.core.env_server.http_server import create_app

from envs.common import max_concurrent_envs
from envs.echo.models import EchoAction, EchoObservation, EchoState
from envs.echo.server import ENV_NAME, EchoEnvironment, envlab_marker


class StallingEchoEnvironment(EchoEnvironment):
    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        folder = Path(os.environ["STALL_DIR"])
        try:
            (folder / "arm").unlink()
        except FileNotFoundError:
            pass
        else:
            (folder / "stalled").write_text(str(time.time()))
            time.sleep(float(os.environ.get("STALL_SECONDS", "3")))
        return super().step(action, timeout_s=timeout_s, **kwargs)


app = create_app(
    StallingEchoEnvironment,
    EchoAction,
    EchoObservation,
    env_name=ENV_NAME,
    max_concurrent_envs=max_concurrent_envs(),
    state_cls=EchoState,
)
app.get("/envlab", include_in_schema=False)(envlab_marker)
