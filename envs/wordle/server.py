"""Wordle environment server (openenv 0.10).

Run with ``python -m uvicorn envs.wordle.server:app --host 127.0.0.1 --port 8000`` or
``python -m envs.wordle.server --port 8000``. Episodes live on the WebSocket ``/ws``
(one environment per connection, at most ``MAX_CONCURRENT_ENVS`` per process); the
HTTP ``/reset`` and ``/step`` routes build a throwaway environment per request.

The secret word lives in a private attribute, never in ``WordleState`` (which
``/ws`` ``state`` messages and HTTP ``/state`` serve) nor in metadata: only the
message of the observation that ends the game names it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from openenv.core.env_server.interfaces import Environment

from envs.bundled_app import BundledEnvironment, create_bundled_app
from envs.common import episode_id_or_new, require_open_episode, serve
from envs.wordle.models import (
    MAX_GUESSES,
    WORD_LENGTH,
    WordleAction,
    WordleObservation,
    WordleState,
)
from envs.wordle.rules import RIGHT_PLACE, score_guess

ENV_NAME = "wordle"
ENV_VERSION = "0.1.0"
WORDS_PATH = Path(__file__).with_name("words.txt")
_SHOWN_GUESS_CHARS = 20  # how much of a refused guess is quoted back


def load_words(path: Path = WORDS_PATH) -> tuple[str, ...]:
    """The sorted word list; secrets and allowed guesses both come from it.

    Raises:
        ValueError: if a line is not a lowercase five-letter word, or the file is not
            sorted and free of duplicates (seeded secrets depend on the exact order).
    """
    words = path.read_text(encoding="ascii").split()
    for number, word in enumerate(words, start=1):
        if len(word) != WORD_LENGTH or not (word.isascii() and word.isalpha() and word.islower()):
            raise ValueError(f"{path}: entry {number} ({word!r}) is not a lowercase 5-letter word")
    if list(words) != sorted(set(words)):
        raise ValueError(f"{path}: words must be sorted and unique")
    if not words:
        raise ValueError(f"{path}: no words")
    return tuple(words)


WORDS = load_words()
_WORD_SET = frozenset(WORDS)
_SYSTEM_RANDOM = random.SystemRandom()


def secret_for_seed(seed: int | None) -> str:
    """The secret for ``seed``: the same seed always gives the same word; None, a random one."""
    if seed is None:
        return _SYSTEM_RANDOM.choice(WORDS)
    return random.Random(seed).choice(WORDS)


def feedback_lines(guess: str, marks: str) -> str:
    """The two feedback lines for one guess: ``C R A N E`` / ``X G Y X X``."""
    return f"{' '.join(guess.upper())}\n{' '.join(marks)}"


def invalid_reason(guess: str, previous: list[str]) -> str | None:
    """Why the normalised ``guess`` is refused, or None if it is a playable guess."""
    if not guess or not (guess.isascii() and guess.isalpha()):
        return "use letters A-Z only"
    if len(guess) != WORD_LENGTH:
        return f"a guess must have exactly {WORD_LENGTH} letters (got {len(guess)})"
    if guess not in _WORD_SET:
        return "not in the word list"
    if guess in previous:
        return "already guessed"
    return None


def _guesses_left_text(left: int) -> str:
    return f"{left} guess left." if left == 1 else f"{left} guesses left."


RULES = (
    f"Guess the secret {WORD_LENGTH}-letter English word in {MAX_GUESSES} tries. "
    "Each guess gets two lines back: your guess, then one mark per letter "
    "(G = right letter, right place; Y = in the word, elsewhere; X = not in the word). "
    "A repeated letter is marked G or Y only as many times as the word has it. "
    "A guess that is not a known 5-letter word, or that repeats an earlier guess, "
    "is refused and does not use a try."
)


class WordleEnvironment(
    BundledEnvironment[WordleState], Environment[WordleAction, WordleObservation, WordleState]
):
    """One game of Wordle per episode; reward 1.0 for finding the word, else 0.0."""

    NAME, VERSION = ENV_NAME, ENV_VERSION
    DESCRIPTION = (
        f"Wordle: find a secret {WORD_LENGTH}-letter word in {MAX_GUESSES} guesses "
        "from G/Y/X letter feedback; reward 1.0 for a win, 0.0 otherwise. "
        "Refused guesses do not use a try."
    )

    def __init__(self) -> None:
        super().__init__()
        self._state = WordleState()
        self._secret = ""
        self._board: list[str] = []
        self._started = False

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        word: str | None = None,
        **kwargs: Any,
    ) -> WordleObservation:
        """Start a game: ``word`` (from the list) if given, else the word for ``seed``."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an integer, got {type(seed).__name__}")
        episode_id = episode_id_or_new(episode_id)
        if word is not None:
            if not isinstance(word, str):
                raise ValueError(f"word must be a string, got {type(word).__name__}")
            word = word.strip().lower()
            if word not in _WORD_SET:
                raise ValueError("word must be a 5-letter word from the word list")
            secret = word
        else:
            secret = secret_for_seed(seed)
        self._secret = secret
        self._board = []
        self._state = WordleState(episode_id=episode_id, step_count=0)
        self._started = True
        return self._observation(message=RULES, feedback="", reward=None, invalid=False, greens=0)

    def step(
        self, action: WordleAction, timeout_s: float | None = None, **kwargs: Any
    ) -> WordleObservation:
        """Score ``action.guess``; a refused guess counts as a step but not as a guess."""
        state = self._state
        require_open_episode(started=self._started, episode_id=state.episode_id, done=state.done)
        state.step_count += 1
        guess = action.guess.strip().lower()
        reason = invalid_reason(guess, state.guesses)
        if reason is not None:
            state.invalid_moves += 1
            shown = guess[:_SHOWN_GUESS_CHARS] + ("..." if len(guess) > _SHOWN_GUESS_CHARS else "")
            left = state.max_guesses - len(state.guesses)
            message = (
                f"Invalid guess {shown!r}: {reason}. No guess used; {_guesses_left_text(left)}"
            )
            return self._observation(
                message=message, feedback="", reward=0.0, invalid=True, greens=0
            )

        marks = score_guess(guess, self._secret)
        feedback = feedback_lines(guess, marks)
        state.guesses.append(guess)
        self._board.append(feedback)
        state.won = guess == self._secret
        left = state.max_guesses - len(state.guesses)
        state.done = state.won or left == 0
        word = self._secret.upper()
        if state.won:
            tries = len(state.guesses)
            message = (
                f"You won in {tries} {'guess' if tries == 1 else 'guesses'}! The word was {word}."
            )
        elif state.done:
            message = f"Out of guesses. The word was {word}."
        else:
            message = _guesses_left_text(left)
        return self._observation(
            message=message,
            feedback=feedback,
            reward=1.0 if state.won else 0.0,
            invalid=False,
            greens=marks.count(RIGHT_PLACE),
        )

    def _observation(
        self, *, message: str, feedback: str, reward: float | None, invalid: bool, greens: int
    ) -> WordleObservation:
        state = self._state
        return WordleObservation(
            message=message,
            feedback=feedback,
            board="\n".join(self._board),
            guesses_left=state.max_guesses - len(state.guesses),
            invalid_move=invalid,
            won=state.won,
            reward=reward,
            done=state.done,
            metadata={
                "episode_id": state.episode_id,
                "step_count": state.step_count,
                "num_guesses": len(state.guesses),
                "invalid_moves": state.invalid_moves,
                "greens": greens,
                "won": state.won,
            },
        )


app, envlab_marker = create_bundled_app(
    WordleEnvironment, WordleAction, WordleObservation, WordleState, name=ENV_NAME, version=ENV_VERSION
)

if __name__ == "__main__":
    serve(app, ENV_NAME)
