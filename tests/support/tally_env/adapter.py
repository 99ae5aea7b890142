"""The tally environment as TRL sees it: one `add(count)` tool."""

from __future__ import annotations

from typing import Any

from envs.adapters.base import OpenEnvAdapter


class TallyAdapter(OpenEnvAdapter):
    episode_reward = "last"

    def __init__(self) -> None:
        super().__init__()
        self.won = False
        self.overshoot = 0  # how far past the target the episode ended; an attribute

    def _open_client(self) -> Any:
        from tests.support.tally_env.client import TallyEnv

        return TallyEnv(base_url=self.base_url).sync()

    def reset(self, **row: Any) -> str | None:
        self.won = False
        self.overshoot = 0
        return "\n" + self._start(seed=row.get("seed")).observation.text

    def add(self, count: int) -> str:
        """Add to the tally.

        Args:
            count: How much to add: 1, 2 or 3.

        Returns:
            The target and the tally after the addition.
        """
        from tests.support.tally_env.models import TallyAction

        result = self._step(TallyAction(count=count))
        state = result.observation.text.removesuffix(".").split()
        target, total = int(state[1].rstrip(",")), int(state[3])
        self.won = total == target
        self.overshoot = max(total - target, 0)
        return str(result.observation.text)
