"""Wire models of the wordle environment (pydantic, shared by server and client).

The secret word is deliberately absent from every model here: ``WordleState`` is
served to any client that asks, so the server keeps the secret outside it.
"""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

WORD_LENGTH = 5
MAX_GUESSES = 6
# Long enough for any word a model might try, short enough to bound a frame; longer
# text is a VALIDATION_ERROR, shorter wrong text is an invalid move (no guess used).
MAX_GUESS_CHARS = 100


class WordleAction(Action):
    """Guess a five-letter word (case and surrounding spaces are ignored)."""

    guess: str = Field(..., max_length=MAX_GUESS_CHARS, description="A five-letter English word")


class WordleObservation(Observation):
    """What the agent sees after reset or a guess.

    ``feedback`` holds two lines for the latest valid guess: the letters, then one mark
    per letter (``G`` right place, ``Y`` elsewhere in the word, ``X`` absent), e.g.
    ``C R A N E`` / ``X G Y X X``. ``board`` stacks those lines for every valid guess so
    far. ``metadata`` always carries ``episode_id``, ``step_count`` (every step, invalid
    ones included), ``num_guesses``, ``invalid_moves``, ``greens`` (of the latest guess)
    and ``won``.
    """

    message: str = Field(
        default="", description="Rules on reset, then the status or invalid-move message"
    )
    feedback: str = Field(default="", description="Letters and marks of the latest valid guess")
    board: str = Field(default="", description="Feedback of every valid guess so far")
    guesses_left: int = Field(default=MAX_GUESSES, ge=0, description="Valid guesses remaining")
    invalid_move: bool = Field(
        default=False, description="Whether the latest guess was refused (no guess used)"
    )
    won: bool = Field(default=False, description="Whether the word has been found")


class WordleState(State):
    """Server-side episode state (``episode_id`` and ``step_count`` come from State)."""

    guesses: list[str] = Field(default_factory=list, description="Valid guesses so far")
    max_guesses: int = Field(default=MAX_GUESSES, ge=1, description="Guesses allowed")
    invalid_moves: int = Field(default=0, ge=0, description="Refused guesses so far")
    done: bool = Field(default=False, description="Whether the episode has ended")
    won: bool = Field(default=False, description="Whether the word has been found")
