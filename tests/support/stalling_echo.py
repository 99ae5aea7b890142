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

from envs.bundled_app import create_bundled_app
from envs.echo.models import EchoAction, EchoObservation, EchoState
from envs.echo.server import ENV_NAME, ENV_VERSION, EchoEnvironment


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


# The bundled echo's app and ``/envlab`` marker (same name and version), on this environment.
app, _ = create_bundled_app(
    StallingEchoEnvironment, EchoAction, EchoObservation, EchoState, name=ENV_NAME, version=ENV_VERSION
)
