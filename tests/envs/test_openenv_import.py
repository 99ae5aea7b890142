"""openenv's Gradio page stays unimported where it is off (envs/__init__.py): the servers and
the lab's processes start seconds sooner, and a server asked for the page still gets it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys, time
started = time.perf_counter()
import envs.echo.server as server
from fastapi.testclient import TestClient
client = TestClient(server.app)
health = client.get("/health").status_code
web = client.get("/web").status_code
print(json.dumps({"gradio": "gradio" in sys.modules and sys.modules["gradio"] is not None,
                  "health": health, "web": web, "seconds": time.perf_counter() - started}))
"""


def _probe(**env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k != "ENABLE_WEB_INTERFACE"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=180,
        env={**base, "PYTHONPATH": str(ROOT), **env},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_server_without_the_web_page_serves_without_importing_gradio():
    probe = _probe()
    assert probe["gradio"] is False
    assert probe["health"] == 200 and probe["web"] == 404


def test_a_server_asked_for_the_web_page_imports_gradio_and_serves_it():
    probe = _probe(ENABLE_WEB_INTERFACE="true")
    assert probe["gradio"] is True
    assert probe["health"] == 200 and probe["web"] in (200, 307)
