"""Wordle environment: find a secret five-letter word in six guesses.

The server lives in ``envs.wordle.server`` (imports FastAPI and reads the word list);
clients only need ``envs.wordle.client`` and ``envs.wordle.models``.
"""

from envs.wordle.client import WordleEnv, open_wordle_env
from envs.wordle.models import WordleAction, WordleObservation, WordleState

__all__ = ["WordleAction", "WordleEnv", "WordleObservation", "WordleState", "open_wordle_env"]
