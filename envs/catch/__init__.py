"""Catch environment: OpenSpiel's catch, move the paddle under the falling ball.

The server lives in ``envs.catch.server`` (imports FastAPI and, when installed,
pyspiel); clients only need ``envs.catch.client`` and ``envs.catch.models``.
"""

from envs.catch.client import CatchEnv, open_catch_env
from envs.catch.models import CatchAction, CatchObservation, CatchState

__all__ = ["CatchAction", "CatchEnv", "CatchObservation", "CatchState", "open_catch_env"]
