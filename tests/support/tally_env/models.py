"""Wire models of the tally environment (pydantic, shared by server and client)."""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class TallyAction(Action):
    count: int = Field(..., ge=1, le=3, description="How much to add (1 to 3)")


class TallyObservation(Observation):
    text: str = Field(default="", description="The target and the tally so far")


class TallyState(State):
    target: int = Field(default=0, ge=0)
    total: int = Field(default=0, ge=0)
    done: bool = Field(default=False)
