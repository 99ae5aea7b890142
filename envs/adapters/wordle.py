"""The wordle environment as TRL sees it: one `guess(guess)` tool, game stats on the instance.

TRL appends `reset`'s text to the user message and turns every public method into a
tool, so helpers here are private; the public attributes are read after each rollout.
"""

from __future__ import annotations

from typing import Any

from envs.adapters.base import OpenEnvAdapter

# envs.wordle.models.MAX_GUESS_CHARS; openenv is imported lazily (see envs/adapters/echo.py).
MAX_GUESS_CHARS = 100
MAX_GUESSES = 6  # envs.wordle.models.MAX_GUESSES: the success bonus's max_steps


class WordleAdapter(OpenEnvAdapter):
    episode_reward = "last"  # 1.0 on the winning guess, 0.0 on every other
    max_guesses = MAX_GUESSES

    def __init__(self) -> None:
        super().__init__()
        self._clear_game()

    def _open_client(self) -> Any:
        from envs.wordle.client import WordleEnv

        return WordleEnv(base_url=self.base_url).sync()

    def _clear_game(self) -> None:
        self.won = False
        self.num_guesses = 0
        self.best_greens = 0
        self.invalid_moves = 0

    def reset(self, **row: Any) -> str | None:
        self._clear_game()
        result = self._start(seed=row.get("seed"))
        return "\n" + result.observation.message

    def guess(self, guess: str) -> str:
        """Guess the secret five-letter English word; a refused guess uses no try.

        Args:
            guess: A five-letter English word, for example "crane".

        Returns:
            The guess, its marks (G right place, Y elsewhere, X absent) and the game status.
        """
        from envs.wordle.models import WordleAction

        # Longer text would be a protocol error; clipped, it is an ordinary invalid move.
        result = self._step(WordleAction(guess=str(guess)[:MAX_GUESS_CHARS]))
        observation = result.observation
        metadata = observation.metadata or {}
        self.won = observation.won
        self.num_guesses = _count(metadata, "num_guesses")
        self.invalid_moves = _count(metadata, "invalid_moves")
        self.best_greens = max(self.best_greens, _count(metadata, "greens"))
        if observation.invalid_move:
            return observation.message
        return f"{observation.feedback}\n{observation.message}"


def _count(metadata: dict[str, Any], key: str) -> int:
    """A non-negative integer the server reports in metadata (checked: it is remote input)."""
    value = metadata.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RuntimeError(f"wordle server sent metadata {key}={value!r}, expected a count")
    return value
