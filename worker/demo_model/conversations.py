"""The echo tool the demo model learns to call, and the synthetic conversations it learns from."""

from __future__ import annotations

import random
from typing import Any

from envs.adapters.echo import ECHO_TOOL_DOCSTRING, echo  # noqa: F401 (the tool the model sees)
from worker.episodes import tool_call_message

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


def random_phrase(rng: random.Random, *, max_words: int = 3) -> str:
    """One to `max_words` words from `WORDS`, joined by single spaces."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, max_words)))


# How the warm-up asks for an echo. Several verbs, quote styles and sentence shapes, so a
# request worded another way still reads as "call echo with the quoted text". The demo run's
# own prompt (webapp.runs.views.demo_config) is the first one.
TRAINING_WORDINGS: tuple[str, ...] = (
    "Echo '{phrase}'.",
    "Please echo '{phrase}'.",
    'Echo "{phrase}" back to me.',
    "Use the echo tool on '{phrase}'.",
    "Call echo with the message '{phrase}'.",
    "Repeat '{phrase}' using the tool.",
    "Can you echo '{phrase}'?",
    "echo: {phrase}",
    'I need an echo of "{phrase}", please.',
    "Send '{phrase}' to the echo tool.",
    "Have the tool say '{phrase}'.",
    "Echo back the phrase '{phrase}' for me.",
    "Say \"{phrase}\" through echo.",
    "The message is '{phrase}'. Echo it.",
)
# Never seen in training: what `evaluation.measure_tool_calls(wordings=UNSEEN_WORDINGS)`
# asks, to show the model follows a request it was not drilled on. The first is the
# wording a user tried on the earlier demo model, which failed it every time.
UNSEEN_WORDINGS: tuple[str, ...] = (
    "Echo '{phrase}' with the echo tool.",
    'Could you repeat "{phrase}" for me?',
    "Make the echo tool return '{phrase}'.",
    "Echo this: {phrase}",
    "Please send the words '{phrase}' through the echo tool.",
)
# Phrases in the warm-up run from one word to this many (the demo run asks for 1-3).
TRAINING_MAX_WORDS = 5


def user_prompt(phrase: str, wording: str = TRAINING_WORDINGS[0]) -> str:
    return wording.replace("{phrase}", phrase)


def imperfect_copy(phrase: str, rng: random.Random) -> str:
    """`phrase` copied with one slip: a word swapped for another, dropped, doubled or added,
    or two words exchanged. Never the phrase itself, never empty."""
    words = phrase.split()
    while True:
        slip = rng.choice(("replace", "drop", "double", "add", "exchange"))
        out = list(words)
        at = rng.randrange(len(out))
        if slip == "replace":
            out[at] = rng.choice(WORDS)
        elif slip == "drop" and len(out) > 1:
            del out[at]
        elif slip == "double":
            out.insert(at, out[at])
        elif slip == "add":
            out.insert(rng.randrange(len(out) + 1), rng.choice(WORDS))
        elif slip == "exchange" and len(out) > 1:
            other = rng.randrange(len(out))
            out[at], out[other] = out[other], out[at]
        copied = " ".join(out)
        if copied and copied != phrase:
            return copied


def echo_conversation(
    phrase: str, *, wording: str = TRAINING_WORDINGS[0], message: str | None = None
) -> list[dict[str, Any]]:
    """user asks for an echo -> assistant calls `echo` with `message` (the phrase unless
    given) -> tool answers with it -> assistant reports what came back."""
    said = phrase if message is None else message
    return [
        {"role": "user", "content": user_prompt(phrase, wording)},
        tool_call_message("echo", {"message": said}),
        {"role": "tool", "name": "echo", "content": said},
        {"role": "assistant", "content": f"The tool echoed '{said}'."},
    ]


def training_conversation(rng: random.Random, *, exact_fraction: float) -> list[dict[str, Any]]:
    """A warm-up conversation: a random wording and phrase length; the call copies the phrase
    exactly with probability `exact_fraction`, else with one slip."""
    phrase = random_phrase(rng, max_words=TRAINING_MAX_WORDS)
    wording = rng.choice(TRAINING_WORDINGS)
    message = None if rng.random() < exact_fraction else imperfect_copy(phrase, rng)
    return echo_conversation(phrase, wording=wording, message=message)
