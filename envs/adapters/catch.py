"""The catch environment as TRL sees it: `move(direction)` and `stay()` tools.

`reward` is the episode's result: 0.0 until the ball lands, then +1.0 or -1.0 (the last
step reward: the best one would hide a miss).
"""

from __future__ import annotations

from typing import Any

from envs.adapters.base import OpenEnvAdapter

MOVES = ("left", "right")


class CatchAdapter(OpenEnvAdapter):
    episode_reward = "last"

    def __init__(self) -> None:
        super().__init__()
        self.won = False
        self.catches = 0  # 0 or 1: one ball per episode; a reward-term attribute

    def _open_client(self) -> Any:
        from envs.catch.client import CatchEnv  # openenv lazily: see envs/adapters/echo.py

        return CatchEnv(base_url=self.base_url).sync()

    def reset(self, **row: Any) -> str | None:
        self.won = False
        self.catches = 0
        # The grid size knobs (a run's `reset` dict): only when set, so the server's defaults apply.
        sizes = {key: row[key] for key in ("rows", "columns") if row.get(key) is not None}
        result = self._start(seed=row.get("seed"), **sizes)
        return "\n" + result.observation.text

    def move(self, direction: str) -> str:
        """Move the paddle one column; the ball then falls one row.

        Args:
            direction: Which way to move the paddle. (choices: ["left", "right"])

        Returns:
            The grid after the move, and the outcome once the ball has landed.
        """
        chosen = direction.strip().lower() if isinstance(direction, str) else direction
        if chosen not in MOVES:
            raise ValueError(
                f"direction must be 'left' or 'right', got {direction!r} "
                "(call stay() to keep the paddle where it is)"
            )
        return self._play(chosen)

    def stay(self) -> str:
        """Keep the paddle where it is; the ball falls one row.

        Returns:
            The grid after the move, and the outcome once the ball has landed.
        """
        return self._play("stay")

    def _play(self, direction: str) -> str:
        from envs.catch.models import CatchAction

        result = self._step(CatchAction(direction=direction))
        self.reward = float(result.reward or 0.0)
        self.won = result.observation.outcome == "caught"
        self.catches = int(self.won)
        return str(result.observation.text)
