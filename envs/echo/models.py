"""Wire models of the echo environment (pydantic, shared by server and client)."""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

MAX_MESSAGE_CHARS = 2000
MAX_STEPS = 4


class EchoAction(Action):
    """Say something; the environment echoes it back."""

    message: str = Field(..., max_length=MAX_MESSAGE_CHARS, description="Text to echo back")


class EchoObservation(Observation):
    """What the agent sees after reset or a step.

    ``metadata`` always carries ``episode_id``, ``step_count`` and ``max_steps``: a
    client compares ``episode_id`` with the one reset gave it to notice that a
    restarted server handed it a fresh environment.
    """

    echoed_message: str = Field(default="", description="The message just sent (empty on reset)")
    instruction: str = Field(default="", description="What the agent is asked to do")


class EchoState(State):
    """Server-side episode state (``episode_id`` and ``step_count`` come from State)."""

    target: str | None = Field(default=None, description="Phrase to repeat, if any")
    max_steps: int = Field(default=MAX_STEPS, ge=1, description="Steps allowed per episode")
    done: bool = Field(default=False, description="Whether the episode has ended")
