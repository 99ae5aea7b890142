"""The echo tool the demo model learns to call, and the synthetic conversations it learns from."""

from __future__ import annotations

import random
from typing import Any

# Words for the phrases the model is asked to echo. Lowercase, alphabetic, and each one a
# single token of the demo tokenizer (the tokenizer is trained on text rich in them), so
# echoing a phrase is copying one to three tokens.
WORDS: tuple[str, ...] = tuple(
    """
    apple river stone cloud green happy light music paper table water window yellow
    bread chair dream earth field glass heart house judge knife lemon money night ocean
    party queen radio smile tiger truck voice watch youth zebra amber blue brave candle
    coffee dance eagle forest garden honey island jelly kite lake mountain nest orange
    pencil quiet rabbit silver sugar train umbrella violet winter yarn bright calm clever
    cold early fast gentle good great little lucky new old proud quick rich short slow
    small soft strong sweet tall warm wild young apple bird boat book cake cat dog door
    egg fish flower friend game gold hat hill horse king lamp leaf moon mouse road rock
    rose sea ship shoe sky snow song star sun tree wind wolf wood world blue red black
    white brown pink purple hello again always today tomorrow morning evening summer
    spring autumn travel happy story planet rocket robot pixel signal copper marble velvet
    """.split()
)
# Deduplicated, order kept: the list above is easier to edit with repeats allowed.
WORDS = tuple(dict.fromkeys(WORDS))


def echo(message: str) -> str:
    """Echo a message back to the caller.

    Args:
        message: The message to echo back.

    Returns:
        The same message, unchanged.
    """
    return message


# The contract with the environment adapter: TRL renders an environment_factory method as
# a tool with transformers' `get_json_schema` (bound methods drop `self`), so the adapter's
# `echo` must have this name, signature and docstring for the prompt the demo model was
# trained on to match the prompt it sees during GRPO.
ECHO_TOOL_DOCSTRING: str = echo.__doc__ or ""


def random_phrase(rng: random.Random) -> str:
    """One to three words from `WORDS`, joined by single spaces."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def user_prompt(phrase: str) -> str:
    return f"Echo '{phrase}'."


def echo_conversation(phrase: str) -> list[dict[str, Any]]:
    """user asks for an echo -> assistant calls `echo` -> tool answers -> assistant reports."""
    return [
        {"role": "user", "content": user_prompt(phrase)},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "echo", "arguments": {"message": phrase}}}
            ],
        },
        {"role": "tool", "name": "echo", "content": phrase},
        {"role": "assistant", "content": f"The tool echoed '{phrase}'."},
    ]
