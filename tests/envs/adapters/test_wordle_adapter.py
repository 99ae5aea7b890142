"""The wordle adapter as TRL drives it, against a real wordle server (uvicorn subprocess)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from transformers.utils import get_json_schema

from envs.adapters import adapter_class
from envs.adapters.wordle import WordleAdapter
from envs.wordle.server import RULES, WORDS, feedback_lines, score_guess, secret_for_seed
from tests.envs.servers import run_env_server

APP = "envs.wordle.server:app"
SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "OPENENV_MODE": "simulation"}
SEED = 31
# An adapter's attributes before its first guess, and again after a reset.
FRESH_STATS = {
    "won": False,
    "num_guesses": 0,
    "best_greens": 0,
    "invalid_moves": 0,
    "done": False,
    "reward": 0.0,
    "lost": False,
    "tool_calls": 0,
    "tool_failures": 0,
}


def stats(adapter: Any) -> dict[str, Any]:
    names = ["won", "num_guesses", "best_greens", "invalid_moves", "done", "reward", "lost"]
    names += ["tool_calls", "tool_failures"]
    return {name: getattr(adapter, name) for name in names}


def wrong_words(secret: str, count: int) -> list[str]:
    return [w for w in WORDS if w != secret][:count]


@pytest.fixture(scope="module")
def wordle_url() -> Iterator[str]:
    with run_env_server(APP, {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "4"}) as url:
        yield url


@pytest.fixture
def adapter(wordle_url: str) -> Iterator[Any]:
    # Bound through the registry, as the worker does it.
    cls = adapter_class(metadata_name="wordle", base_url=wordle_url, env_name="wordle")
    instance = cls()
    yield instance
    instance._close()


# --- what TRL sees ----------------------------------------------------------------


def test_only_tool_is_guess() -> None:
    # TRL's discovery: public functions on the class, less `reset` and `get_reward`.
    public = [
        name
        for name, _ in inspect.getmembers(WordleAdapter, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in {"reset", "get_reward"}
    ]
    assert public == ["guess"]


def test_guess_tool_schema() -> None:
    assert get_json_schema(WordleAdapter.guess) == {
        "type": "function",
        "function": {
            "name": "guess",
            "description": "Guess the secret five-letter English word; a refused guess uses no try.",
            "parameters": {
                "type": "object",
                "properties": {
                    "guess": {
                        "type": "string",
                        "description": 'A five-letter English word, for example "crane".',
                    }
                },
                "required": ["guess"],
            },
            "return": {
                "type": "string",
                "description": (
                    "The guess, its marks (G right place, Y elsewhere, X absent) and the game status."
                ),
            },
        },
    }


def test_constructing_does_not_connect() -> None:
    instance = WordleAdapter()  # TRL builds one at start-up only to list its tools
    assert instance._client is None
    assert stats(instance) == FRESH_STATS


# --- playing over the wire --------------------------------------------------------


def test_win_returns_only_new_feedback(adapter: Any) -> None:
    secret = secret_for_seed(SEED)
    miss = wrong_words(secret, 1)[0]

    assert adapter.reset(seed=SEED, prompt="ignored") == "\n" + RULES

    assert (
        adapter.guess(miss) == f"{feedback_lines(miss, score_guess(miss, secret))}\n5 guesses left."
    )
    miss_greens = score_guess(miss, secret).count("G")
    assert (adapter.num_guesses, adapter.best_greens, adapter.done) == (1, miss_greens, False)

    assert adapter.guess("abc") == (
        "Invalid guess 'abc': a guess must have exactly 5 letters (got 3). "
        "No guess used; 5 guesses left."
    )
    assert adapter.guess("x" * 500) == (  # clipped to the action's limit, not a protocol error
        f"Invalid guess '{'x' * 20}...': a guess must have exactly 5 letters (got 100). "
        "No guess used; 5 guesses left."
    )

    assert adapter.guess(secret.upper()) == (
        f"{feedback_lines(secret, 'GGGGG')}\nYou won in 2 guesses! The word was {secret.upper()}."
    )
    assert stats(adapter) == {
        "won": True,
        "num_guesses": 2,
        "best_greens": 5,
        "invalid_moves": 2,
        "done": True,
        "reward": 1.0,
        "lost": False,
        "tool_calls": 4,
        "tool_failures": 0,
    }

    with pytest.raises(RuntimeError, match=r"^Game over\.$"):
        adapter.guess(secret)
    assert adapter.tool_calls == 4


def test_loss_then_reset_clears_stats(adapter: Any) -> None:
    secret = secret_for_seed(SEED)
    adapter.reset(seed=SEED)
    replies = [adapter.guess(w) for w in wrong_words(secret, 6)]
    assert replies[-1].endswith(f"\nOut of guesses. The word was {secret.upper()}.")
    assert replies[-2].endswith("\n1 guess left.")
    assert all(reply.count("\n") == 2 for reply in replies)
    assert (adapter.won, adapter.done, adapter.reward, adapter.num_guesses) == (False, True, 0.0, 6)
    with pytest.raises(RuntimeError, match=r"^Game over\.$"):
        adapter.guess(secret)

    # Pooled instances are reused: reset starts a fresh game with fresh counters.
    assert adapter.reset(seed=SEED + 1) == "\n" + RULES
    assert stats(adapter) == FRESH_STATS
    assert adapter.guess(secret_for_seed(SEED + 1)).startswith(
        f"{feedback_lines(secret_for_seed(SEED + 1), 'GGGGG')}\nYou won in 1 guess!"
    )
    assert (adapter.won, adapter.reward) == (True, 1.0)


def test_reset_without_seed_plays_a_listed_word(adapter: Any) -> None:
    assert adapter.reset() == "\n" + RULES
    reply = adapter.guess(WORDS[0])
    assert reply.splitlines()[0] == " ".join(WORDS[0].upper())
    assert set(reply.splitlines()[1].split()) <= {"G", "Y", "X"}
