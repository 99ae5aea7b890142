"""What the tests of every bundled OpenEnv server share: how openenv reports errors over
the wire, a proxy-free JSON GET, and `openenv validate` run against a live server."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect as ws_connect

from tests.envs.servers import run_server_command
from tests.support.ports import free_port

SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "OPENENV_MODE": "simulation"}
CAPACITY_ERROR = (
    "Server error: Server at capacity: 2/2 sessions active. "
    "Cannot accept new connections. (code: CAPACITY_REACHED)"
)
NOT_STARTED_ERROR = (
    "Server error: No episode in progress: call reset() first (a restarted server gives "
    "a reconnecting client a fresh environment) (code: EXECUTION_ERROR)"
)


def server_error(call: Callable[[], object]) -> str:
    """The message of the RuntimeError a client's `call` raises: how an openenv client reports
    what the server refused."""
    with pytest.raises(RuntimeError) as excinfo:
        call()
    return str(excinfo.value)


def over_error(episode_id: str) -> str:
    return (
        f"Server error: Episode {episode_id} is over: call reset() to start a new one "
        "(code: EXECUTION_ERROR)"
    )


@contextmanager
def two_session_server(module: str) -> Iterator[str]:
    """`python -m <module> --port N`, the second supported way to start a server, with room
    for two sessions: its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", module, "--port", str(port)]
    with run_server_command(command, url, {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "2"}):
        yield url


def refused_then_stepped(
    url: str, reset: dict[str, Any], refused: dict[str, Any], step: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Over the server's raw WebSocket: reset with `reset`, send the step `refused` (an action its
    schema refuses), then the step `step`. Returns the three replies: the reset's, the refusal,
    and the step's, so a test sees that the refused action did not count as a step."""
    with ws_connect(url.replace("http://", "ws://") + "/ws", proxy=None) as ws:
        replies = []
        for kind, data in (("reset", reset), ("step", refused), ("step", step)):
            ws.send(json.dumps({"type": kind, "data": data}))
            replies.append(json.loads(ws.recv(timeout=5)))
    first, error, stepped = replies
    return first, error, stepped


def assert_session_refused(client: Any) -> None:
    """A client of a full server: its socket opens, and the refusal comes as the first reply
    (to its reset). The client is closed."""
    try:
        client.connect()
        with pytest.raises(RuntimeError) as excinfo:
            client.reset()
        assert str(excinfo.value) == CAPACITY_ERROR
    finally:
        client.close()


def envlab_metadata(name: str, description: str) -> dict[str, Any]:
    """What `GET /metadata` answers for one of the bundled servers."""
    return {
        "name": name,
        "description": description,
        "readme_content": None,
        "version": "0.1.0",
        "author": "envlab",
        "documentation_url": None,
    }


def get_json(url: str) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=5) as response:
        assert response.status == 200
        return json.load(response)


# The fields every observation and every state starts with: openenv's own, before a server's.
BASE_OBSERVATION_FIELDS = ["done", "reward", "metadata"]
BASE_STATE_FIELDS = ["episode_id", "step_count"]


def assert_bundled_routes(
    url: str,
    name: str,
    *,
    action: str,
    required: list[str],
    observation: list[str] | None = None,
    state: list[str] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The routes every bundled server shares: /health, envlab's /metadata for `name`, and a
    /schema whose action is `action` with the `required` fields. Where given, the schema's
    observation and state have these fields after openenv's own, in this order. Returns the
    metadata's description and the schema, for the environment's own checks."""
    assert get_json(f"{url}/health") == {"status": "healthy"}
    metadata = get_json(f"{url}/metadata")
    assert metadata == envlab_metadata(name, metadata["description"])
    schema = get_json(f"{url}/schema")
    assert set(schema) == {"action", "observation", "reset_observation", "state"}
    assert schema["action"]["title"] == action
    assert schema["action"]["required"] == required
    if observation is not None:
        assert list(schema["observation"]["properties"]) == [*BASE_OBSERVATION_FIELDS, *observation]
    if state is not None:
        assert list(schema["state"]["properties"]) == [*BASE_STATE_FIELDS, *state]
    return metadata["description"], schema


def assert_openenv_validate_passes(url: str, tmp_path: Path) -> None:
    """openenv's own conformance check: all six criteria pass, in simulation mode."""
    report_path = tmp_path / "report.json"
    command = [sys.executable, "-m", "openenv.cli", "validate", "--url", url]
    run = subprocess.run([*command, "--output", str(report_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        f"Validation report for {url} (profile: openenv-http/1.x)",
        "  standard version: 1.0.0 · mode: simulation",
        "  PASS  openapi_version_available",
        "  PASS  health_endpoint",
        "  PASS  metadata_endpoint",
        "  PASS  schema_endpoint",
        "  PASS  mcp_endpoint",
        "  PASS  mode_endpoint_consistency",
        "Verdict: PASS",
    ]
    report = json.loads(report_path.read_text())
    assert (report["passed"], report["mode"]) == (True, "simulation")
    assert report["summary"] == {
        "passed_count": 6,
        "total_count": 6,
        "failed_criteria": [],
        "required_passed_count": 6,
        "required_total_count": 6,
    }
