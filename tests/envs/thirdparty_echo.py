"""A third-party OpenEnv server that reports the bundled echo's name but is something else.

Shaped like OpenEnv's reference ``echo_env``: an ``MCPEnvironment`` whose ``/metadata``
name is ``EchoEnvironment``, with MCP tools ``echo_message`` and ``echo_with_length``
(not the bundled echo's classic ``echo(message)`` action), and no envlab marker. Serve it
with ``run_env_server("tests.envs.thirdparty_echo:app")``.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State

NAME = "EchoEnvironment"
TOOLS = ("echo_message", "echo_with_length")


class ThirdPartyEchoEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()
        mcp = FastMCP("echo_env")

        @mcp.tool
        async def echo_message(message: str) -> str:
            """Echo the given message back.

            Args:
                message: The message to echo.
            """
            self._state.step_count += 1
            return message

        @mcp.tool
        async def echo_with_length(message: str) -> dict[str, Any]:
            """Echo the message back with its length.

            Args:
                message: The message to echo.
            """
            self._state.step_count += 1
            return {"message": message, "length": len(message)}

        super().__init__(mcp)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return Observation()  # like the reference servers: no episode in observations

    def _step_impl(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        raise ValueError("only MCP actions (list_tools, call_tool)")

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=NAME, description="Echoes messages through MCP tools.", version="1.0.0",
            author="someone else",
        )


app = create_app(
    ThirdPartyEchoEnvironment, CallToolAction, CallToolObservation, env_name="echo_env",
    max_concurrent_envs=4,
)
