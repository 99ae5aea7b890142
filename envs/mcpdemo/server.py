"""mcpdemo environment server: an MCP-style OpenEnv environment (openenv 0.10).

Run with ``python -m uvicorn envs.mcpdemo.server:app --host 127.0.0.1 --port 8000`` or
``python -m envs.mcpdemo.server --port 8000``.

The environment is an ``MCPEnvironment``: its actions are openenv's ``ListToolsAction``
(``{"type": "list_tools"}``) and ``CallToolAction`` (``{"type": "call_tool",
"tool_name": ..., "arguments": {...}}``), stepped over the WebSocket ``/ws`` like any
other action, one environment per connection. ``POST /mcp`` also answers JSON-RPC
``tools/list`` / ``tools/call``, but without a session that is a throwaway environment
and, with one, it bypasses ``step``: no reward, no step count.

openenv's MCP path leaves a tool call's observation bare (no reward, no metadata), so
this environment stamps ``episode_id``, ``step_count`` and ``max_steps`` into every
observation's metadata, plus the reward and ``done``: a client compares the episode id
with the one reset gave it to notice that a restarted server handed it a fresh
environment.
"""

from __future__ import annotations

import random
from typing import Annotated, Any

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from envs.bundled_app import BundledEnvironment
from envs.common import episode_id_or_new, max_concurrent_envs, require_open_episode, serve

ENV_NAME = "mcpdemo"
ENV_VERSION = "0.1.0"
MAX_STEPS = 8
MAX_QUANTITY = 100
MAX_NAME_CHARS = 64
MIN_TARGET, MAX_TARGET = 2, 9


def target_for_seed(seed: int) -> int:
    """The target total a seeded reset asks for (reproducible across processes)."""
    return random.Random(seed).randint(MIN_TARGET, MAX_TARGET)


class McpDemoState(State):
    """Server-side episode state (``episode_id`` and ``step_count`` come from State)."""

    target: int | None = Field(default=None, description="Total quantity to reach, if any")
    items: dict[str, int] = Field(default_factory=dict, description="Quantity per item name")
    max_steps: int = Field(default=MAX_STEPS, ge=1, description="Tool calls allowed per episode")
    done: bool = Field(default=False, description="Whether the episode has ended")


class McpDemoObservation(Observation):
    """What reset returns; ``metadata`` carries ``episode_id``, ``step_count``, ``max_steps``."""

    instruction: str = Field(default="", description="What the agent is asked to do")


def _instruction(target: int | None) -> str:
    if target is None:
        return (
            "Add items with add_item(name, quantity); total() returns the sum of the "
            f"quantities. The episode ends after {MAX_STEPS} tool calls."
        )
    return (
        f"Build a shopping list whose quantities add up to exactly {target}: add items "
        f"with add_item(name, quantity), then call total() to check. You have {MAX_STEPS} "
        "tool calls; a matching total() scores 1.0 and ends the episode."
    )


class McpDemoEnvironment(BundledEnvironment[McpDemoState], MCPEnvironment):
    """A shopping list behind two MCP tools; all state is per instance (per session)."""

    NAME, VERSION = ENV_NAME, ENV_VERSION
    DESCRIPTION = (
        "An MCP-style shopping list: add_item(name, quantity) and total(). With a "
        "target total (from the reset seed), a total() that matches scores 1.0 and "
        f"ends the episode ({MAX_STEPS} tool calls)."
    )

    def __init__(self) -> None:
        self._state = McpDemoState()
        self._started = False
        self._reward = 0.0
        mcp = FastMCP(ENV_NAME)

        # Async tools run on the server's event loop: no worker thread, no locking needed
        # for the per-session state they touch.
        @mcp.tool
        async def add_item(
            name: Annotated[
                str,
                Field(
                    description="Item to add, e.g. 'apple'",
                    min_length=1,
                    max_length=MAX_NAME_CHARS,
                ),
            ],
            quantity: Annotated[
                int, Field(description="How many to add (1-100)", ge=1, le=MAX_QUANTITY)
            ],
        ) -> str:
            """Add some of an item to the shopping list; quantities of one name add up."""
            self._require_active()
            key = name.strip().lower()
            if not key:
                raise ValueError("name must not be blank")
            items = self._state.items
            items[key] = items.get(key, 0) + quantity
            return f"{key}: {items[key]}. Total quantity: {sum(items.values())}."

        @mcp.tool
        async def total() -> int:
            """The total quantity on the shopping list, checked against the target if any."""
            self._require_active()
            value = sum(self._state.items.values())
            if self._state.target is not None and value == self._state.target:
                self._reward = 1.0
                self._state.done = True
            return value

        super().__init__(mcp)

    # --- episode ------------------------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        target: int | None = None,
        **kwargs: Any,
    ) -> McpDemoObservation:
        """Start an episode; the target total is ``target``, else derived from ``seed``."""
        if target is not None:
            if isinstance(target, bool) or not isinstance(target, int):
                raise ValueError(f"target must be an integer, got {type(target).__name__}")
            if not 1 <= target <= MAX_QUANTITY * MAX_STEPS:
                raise ValueError(f"target must be between 1 and {MAX_QUANTITY * MAX_STEPS}")
        elif seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise ValueError(f"seed must be an integer, got {type(seed).__name__}")
            target = target_for_seed(seed)
        self._state = McpDemoState(episode_id=episode_id_or_new(episode_id), target=target)
        self._started = True
        return McpDemoObservation(
            instruction=_instruction(target), reward=None, done=False,
            metadata=self._episode_metadata(self._state.max_steps),
        )

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if not isinstance(action, CallToolAction):
            return super().step(action, timeout_s=timeout_s, **kwargs)
        active = self._begin_call()
        return self._end_call(super().step(action, timeout_s=timeout_s, **kwargs), active)

    async def step_async(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        # The WebSocket handler calls this one (MCPEnvironment overrides it), not step().
        if not isinstance(action, CallToolAction):
            return await super().step_async(action, timeout_s=timeout_s, **kwargs)
        active = self._begin_call()
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        return self._end_call(observation, active)

    def _step_impl(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        raise ValueError(
            f"{ENV_NAME} only takes MCP actions (list_tools, call_tool), got {type(action).__name__}"
        )

    # --- helpers ------------------------------------------------------------------------

    def _require_active(self) -> None:
        require_open_episode(started=self._started, episode_id=self._state.episode_id, done=self._state.done, error=ValueError)

    def _begin_call(self) -> bool:
        """Whether this call counts as a step of a running episode."""
        self._reward = 0.0
        return self._started and not self._state.done

    def _end_call(self, observation: Observation, active: bool) -> Observation:
        state = self._state
        if active:
            state.step_count += 1
            if state.step_count >= state.max_steps:
                state.done = True
        observation.reward = self._reward if active else None
        observation.done = state.done
        observation.metadata = {**observation.metadata, **self._episode_metadata(state.max_steps)}
        return observation


app = create_app(
    McpDemoEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name=ENV_NAME,
    max_concurrent_envs=max_concurrent_envs(),
    state_cls=McpDemoState,
    reset_observation_cls=McpDemoObservation,
)

if __name__ == "__main__":
    serve(app, ENV_NAME)
