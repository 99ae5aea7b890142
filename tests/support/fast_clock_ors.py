"""The bundled ORS server with its session clock running FACTOR times fast: the SDK server
reaps a session not pinged for 900 s (the spec's 15 minutes) of this clock, which is 900 / FACTOR
real seconds, so a test can let a session idle past the expiry in seconds. Everything else
(the HTTP server, the environments, the reaper's 5 s beat) runs in real time.

`python -m uvicorn tests.support.fast_clock_ors:app`; ENVLAB_ORS_CLOCK_FACTOR (default 60).
"""

from __future__ import annotations

import os
import time
import types

from openreward.environments import server as sdk_server

FACTOR = float(os.environ.get("ENVLAB_ORS_CLOCK_FACTOR", "60"))
_started = time.monotonic()

fast_time = types.SimpleNamespace(**{name: getattr(time, name) for name in dir(time) if not name.startswith("__")})
fast_time.monotonic = lambda: _started + (time.monotonic() - _started) * FACTOR
sdk_server.time = fast_time  # type: ignore[attr-defined]  # the module's own `time` name only

from envs.ors.server import app  # noqa: E402 - after the clock is in place

__all__ = ["app"]
