"""Two OpenEnv servers written elsewhere (not bundled, no envlab marker) whose reset takes
options, as OpenEnv's reasoning_gym (`dataset_name`, `size`) or chess (`fen`) do.

* ``classic_app``: a typed ``EchoAction(message)``, so the lab generates one ``echo`` tool.
* ``mcp_app``: an ``MCPEnvironment`` with one MCP tool, ``answer(text)``.

Both start an episode with ``reset(seed, topic="legs", size=10, step_reward=0.0,
max_steps=2, broken=False)``; the first observation names the topic and size ("arithmetic
question 3 of 20"), so a test sees which options arrived. Every step's reward is
``step_reward`` and an episode ends after ``max_steps`` steps; ``quiet=True`` (classic)
leaves the first observation empty (each step's feedback names the question). An unknown topic is refused with the server's own
ValueError; ``broken=True`` fails inside reset with a pydantic validation error, as finqa's
reset does when its question has no ground truth. Serve with
``run_env_server("tests.support.option_servers:classic_app")`` (or ``:mcp_app``); set
``SEEDLESS=1`` in the server's environment to make the question ignore the seed.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import BaseModel, Field

TOPICS = ("legs", "arithmetic")


def question(*, topic: str, size: int, seed: int | None) -> str:
    if topic not in TOPICS:
        raise ValueError(f"unknown topic {topic!r}: this server knows {', '.join(TOPICS)}")
    number = uuid.uuid4().int % size if os.environ.get("SEEDLESS") else (seed or 0) % size
    return f"{topic} question {number} of {size}"


class EchoAction(Action):
    """Answer the quiz question."""

    message: str = Field(description="Your answer")


class QuizObservation(Observation):
    question: str | None = None
    feedback: str | None = None


class _Answer(BaseModel):
    ground_truth: str


class QuizEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()
        self._step_reward = 0.0
        self._max_steps = 2
        self._question = ""

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        topic: str = "legs",
        size: int = 10,
        step_reward: float = 0.0,
        max_steps: int = 2,
        broken: bool = False,
        quiet: bool = False,
    ) -> QuizObservation:
        text = question(topic=topic, size=size, seed=seed)
        if broken:
            _Answer(ground_truth=None)  # type: ignore[arg-type]  # finqa's missing ground truth
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._step_reward = float(step_reward)
        self._max_steps = int(max_steps)
        self._question = text
        # quiet: nothing to append to the prompt (the question comes with each answer's feedback).
        return QuizObservation(question=None if quiet else text, reward=None, done=False)

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> QuizObservation:
        assert isinstance(action, EchoAction)
        self._state.step_count += 1
        return QuizObservation(
            feedback=f"{self._question}: you said {action.message}",
            reward=self._step_reward,
            done=self._state.step_count >= self._max_steps,
        )

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="QuizEnvironment", description="Answers quiz questions.", version="1.0.0",
            author="someone else",
        )


class QuizMcpEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()
        self._step_reward = 0.0
        self._max_steps = 2
        mcp = FastMCP("quiz_mcp")

        @mcp.tool
        async def answer(text: str) -> str:
            """Answer the quiz question.

            Args:
                text: Your answer.
            """
            return f"you said {text}"

        super().__init__(mcp)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        topic: str = "legs",
        size: int = 10,
        step_reward: float = 0.0,
        max_steps: int = 2,
        broken: bool = False,
    ) -> Observation:
        text = question(topic=topic, size=size, seed=seed)
        if broken:
            _Answer(ground_truth=None)  # type: ignore[arg-type]
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._step_reward = float(step_reward)
        self._max_steps = int(max_steps)
        return Observation(metadata={"question": text, **self._bookkeeping()})

    async def step_async(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if isinstance(action, CallToolAction):
            self._state.step_count += 1
            observation.reward = self._step_reward
            observation.done = self._state.step_count >= self._max_steps
            observation.metadata = {**observation.metadata, **self._bookkeeping()}
        return observation

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        raise ValueError("only MCP actions (list_tools, call_tool)")

    def _bookkeeping(self) -> dict[str, Any]:
        return {"episode_id": self._state.episode_id, "step_count": self._state.step_count}

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="QuizMcpEnvironment", description="Answers quiz questions through MCP.",
            version="1.0.0", author="someone else",
        )


classic_app = create_app(QuizEnvironment, EchoAction, QuizObservation, env_name="quiz", max_concurrent_envs=16)
mcp_app = create_app(
    QuizMcpEnvironment, CallToolAction, CallToolObservation, env_name="quiz_mcp", max_concurrent_envs=16
)
