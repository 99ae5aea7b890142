"""A Harbor server for tests: openenv's own Harbor environment (Task API, MCP `run_rollout`,
`capabilities`, `/ws` sessions) over the dataset folder in $HARBOR_STUB_DATASET, served by
openenv's `create_app` without its Gradio UI.

It is the real discovery side of `openenv harbor serve`, minus what cannot run here: the
`harbor` package (Python >= 3.12) and a capture proxy, which only `run_rollout` needs; with
$HARBOR_STUB_ROLLOUTS, `run_rollout` answers recorded rollouts instead (see below). $HARBOR_STUB_BREAK makes one answer wrong, as a broken or hostile server's
would be, to test the catalog's checks:

    splits_types       `/harbor_env/splits` entries with a number for a name and text for a count
    huge_window        `/harbor_env/task_range` answers 500 tasks to a request for 20
    no_task_name       `/harbor_env/task_range` tasks without `task_name`
    no_harnesses       the `capabilities` tool answers without `harnesses`

Run: HARBOR_STUB_DATASET=/path uvicorn tests.envs.harbor_stub:app
"""

from __future__ import annotations

import json
import os
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import CallToolAction, CallToolObservation
from openenv.harbor.environment import HarborEnvironment
from openenv.harbor.models import HarborState

BREAK = os.environ.get("HARBOR_STUB_BREAK", "")
DATASET = os.environ.get("HARBOR_STUB_DATASET", "")
# Recorded rollouts: a JSON file {task_index: HarborRolloutResult fields}. STAND-IN for what
# cannot run here (the `harbor` package, a sandbox, an agent and a GPU engine): `run_rollout`
# answers the recorded result for the task, through the real MCP tool and session, and appends
# the arguments it was called with to $HARBOR_STUB_CALLS (one JSON line each).
ROLLOUTS = os.environ.get("HARBOR_STUB_ROLLOUTS", "")
CALLS = os.environ.get("HARBOR_STUB_CALLS", "")


if ROLLOUTS:
    from openenv.harbor.models import HarborRolloutResult

    _ARGUMENTS = ("split", "task_index", "harness", "sandbox", "reward_key", "keep_sandbox", "force_build",
                  "llm_url", "model", "api_key", "auth_header", "agent_timeout_sec", "agent_step_limit",
                  "sampling", "provider", "purpose", "eval_sampling")  # HarborEnvironment._run_rollout's order

    async def _recorded_rollout(self: Any, *args: Any, **kwargs: Any) -> str:
        call = {**dict(zip(_ARGUMENTS, args, strict=False)), **kwargs}
        split, task_index, harness, sandbox = (call.get(k) for k in ("split", "task_index", "harness", "sandbox"))
        with open(ROLLOUTS) as handle:
            recorded = json.load(handle)
        if CALLS:
            with open(CALLS, "a") as handle:
                handle.write(json.dumps(call) + "\n")
        entry = recorded.get(str(task_index))
        if entry is None:
            return HarborRolloutResult(ok=False, error=f"no task {task_index}", exception_type="IndexError").model_dump_json()
        return HarborRolloutResult(**{**entry, "dataset": split, "harness": harness, "sandbox": sandbox}).model_dump_json()

    HarborEnvironment._run_rollout = _recorded_rollout  # type: ignore[method-assign]

HarborEnvironment.configure(datasets=[DATASET] if DATASET else [])
_real = create_app(
    HarborEnvironment,
    CallToolAction,
    CallToolObservation,
    state_cls=HarborState,
    env_name="harbor_env",
    max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "4")),
)

Scope = dict[str, Any]


def _broken_splits() -> Any:
    return [{"name": 5, "num_tasks": "many"}]


def _broken_window(body: dict[str, Any]) -> Any:
    if BREAK == "huge_window":
        return {
            "tasks": [
                {
                    "index": i,
                    "task_id": f"t{i}",
                    "task_name": f"t{i}",
                    "dataset": body.get("split", ""),
                }
                for i in range(500)
            ]
        }
    return {"tasks": [{"index": 0, "task_id": "t0", "dataset": body.get("split", "")}]}


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send_json(send: Any, value: Any) -> None:
    body = json.dumps(value).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def app(scope: Scope, receive: Any, send: Any) -> None:
    """The real app, with the one answer $HARBOR_STUB_BREAK names replaced."""
    path = scope.get("path", "") if scope["type"] == "http" else ""
    if BREAK == "splits_types" and path == "/harbor_env/splits":
        return await _send_json(send, _broken_splits())
    if BREAK in ("huge_window", "no_task_name") and path == "/harbor_env/task_range":
        return await _send_json(
            send, _broken_window(json.loads(await _read_body(receive) or b"{}"))
        )
    if BREAK == "no_harnesses" and path == "/mcp":
        raw = await _read_body(receive)
        request = json.loads(raw or b"{}")
        if request.get("method") == "tools/call":
            return await _send_json(
                send,
                {
                    "jsonrpc": "2.0",
                    "id": request.get("id"),
                    "result": json.dumps({"sandboxes": []}),
                },
            )
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}

        return await _real(scope, replay, send)
    await _real(scope, receive, send)
