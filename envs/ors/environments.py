"""The bundled Open Reward Standard environments (openreward 0.1.167).

The server names each environment by its lower-cased class name: ``echo`` and
``guessnumber``. One instance serves one session; the SDK refuses every call after a
tool returned ``finished=True`` (``episode_finished``), so the classes only decide when
an episode ends.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from envs.ors.tasks import (
    ECHO_MAX_CALLS,
    ECHO_MAX_PHRASE_CHARS,
    ECHO_TASKS,
    GUESS_HIGH,
    GUESS_LOW,
    GUESS_MAX_CALLS,
    GUESS_TASKS,
    SPLITS,
)

MAX_MESSAGE_CHARS = 2000


def echo_score(message: str, phrase: str) -> float:
    """1.0 for an exact repeat (ends trimmed), else half the similarity (below 0.5)."""
    said = message.strip()
    if said == phrase:
        return 1.0
    return 0.5 * difflib.SequenceMatcher(None, said, phrase).ratio()


def guess_score(number: int, target: int) -> float:
    """1.0 when right; otherwise a small shaping reward (at most 0.1) for being close."""
    if number == target:
        return 1.0
    return round(0.1 * (1 - abs(number - target) / (GUESS_HIGH - GUESS_LOW)), 4)


def _spec_value(task_spec: Mapping[str, Any] | None, key: str) -> Any:
    if not isinstance(task_spec, Mapping) or key not in task_spec:
        raise ValueError(f"task_spec must be an object with a {key!r} field")
    return task_spec[key]


class EchoInput(BaseModel):
    message: str = Field(
        description="The text to say; it is echoed back.", max_length=MAX_MESSAGE_CHARS
    )


class GuessInput(BaseModel):
    number: int = Field(
        description=f"Your guess, from {GUESS_LOW} to {GUESS_HIGH}.", ge=GUESS_LOW, le=GUESS_HIGH
    )


class _BundledEnvironment(Environment):
    """What the bundled environments share: the splits of envs/ors/tasks.py, their tasks
    from ``TASKS``, and a count of the session's tool calls. Not served itself."""

    TASKS: ClassVar[Mapping[str, Sequence[Mapping[str, Any]]]]

    def __init__(self, task_spec: Mapping[str, Any] | None, secrets: dict[str, str] | None) -> None:
        super().__init__(task_spec=dict(task_spec or {}), secrets=secrets or {})
        self.calls = 0

    @classmethod
    def list_splits(cls) -> Sequence[str]:
        return list(SPLITS)

    @classmethod
    def list_tasks(cls, split: str) -> Sequence[Mapping[str, Any]]:
        return cls.TASKS[split]


class Echo(_BundledEnvironment):
    """Repeat the task's phrase with the ``echo`` tool (at most four calls)."""

    TASKS = ECHO_TASKS

    def __init__(
        self, task_spec: Mapping[str, Any] | None = None, secrets: dict[str, str] | None = None
    ) -> None:
        phrase = _spec_value(task_spec, "phrase")
        if not isinstance(phrase, str) or not phrase.strip():
            raise ValueError("task_spec.phrase must be a non-empty string")
        if len(phrase) > ECHO_MAX_PHRASE_CHARS:
            raise ValueError(f"task_spec.phrase is longer than {ECHO_MAX_PHRASE_CHARS} characters")
        super().__init__(task_spec, secrets)
        self.phrase = phrase.strip()

    def get_prompt(self) -> list[TextBlock]:
        return [
            TextBlock(
                text=(
                    f"Repeat exactly, using the echo tool: {self.phrase}\n"
                    f"You have {ECHO_MAX_CALLS} tries; an exact repeat scores 1.0 and ends the episode."
                )
            )
        ]

    @tool
    async def echo(self, params: EchoInput) -> ToolOutput:
        """Say a message; it is echoed back. Repeating the task's phrase exactly scores 1.0."""
        self.calls += 1
        reward = echo_score(params.message, self.phrase)
        return ToolOutput(
            blocks=[TextBlock(text=params.message)],
            reward=reward,
            finished=reward == 1.0 or self.calls >= ECHO_MAX_CALLS,
            metadata={"call": self.calls, "max_calls": ECHO_MAX_CALLS},
        )


class GuessNumber(_BundledEnvironment):
    """Find a hidden whole number with the ``guess`` tool; each miss says higher or lower."""

    TASKS = GUESS_TASKS

    def __init__(
        self, task_spec: Mapping[str, Any] | None = None, secrets: dict[str, str] | None = None
    ) -> None:
        target = _spec_value(task_spec, "target")
        if isinstance(target, bool) or not isinstance(target, int):
            raise ValueError("task_spec.target must be an integer")
        if not GUESS_LOW <= target <= GUESS_HIGH:
            raise ValueError(f"task_spec.target must be from {GUESS_LOW} to {GUESS_HIGH}")
        super().__init__(task_spec, secrets)
        self.target = target

    def get_prompt(self) -> list[TextBlock]:
        return [
            TextBlock(
                text=(
                    f"I am thinking of a whole number from {GUESS_LOW} to {GUESS_HIGH}. "
                    "Find it with the guess tool: after each wrong guess you are told whether "
                    f"the number is higher or lower. You have {GUESS_MAX_CALLS} guesses; "
                    "the right number scores 1.0."
                )
            )
        ]

    @tool
    async def guess(self, params: GuessInput) -> ToolOutput:
        """Guess the hidden number; the answer says whether it is higher or lower."""
        self.calls += 1
        number = params.number
        left = GUESS_MAX_CALLS - self.calls
        if number == self.target:
            text = f"{number} is right!"
        elif left == 0:
            text = f"{number} is wrong and that was your last guess; the number was {self.target}."
        else:
            direction = "higher" if self.target > number else "lower"
            plural = "guess" if left == 1 else "guesses"
            text = f"{number} is wrong: the number is {direction}. {left} {plural} left."
        return ToolOutput(
            blocks=[TextBlock(text=text)],
            reward=guess_score(number, self.target),
            finished=number == self.target or left == 0,
            metadata={"call": self.calls, "max_calls": GUESS_MAX_CALLS},
        )
