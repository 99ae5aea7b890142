"""The echo environment as TRL sees it: one `echo(message)` tool, reward kept on the instance.

Adapter modules import openenv lazily: the web process reads their tool descriptions
(webapp.catalog.toolschema) and must not pay openenv's multi-second import.
"""

from __future__ import annotations

from typing import Any

from envs.adapters.base import OpenEnvAdapter


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


class EchoAdapter(OpenEnvAdapter):
    # Each step scores the message against the target afresh: the episode's best attempt.
    episode_reward = "max"

    def _open_client(self) -> Any:
        from envs.echo.client import EchoEnv

        return EchoEnv(base_url=self.base_url).sync()

    def reset(self, **row: Any) -> str | None:
        self._start(target=row.get("target"))
        return None

    def echo(self, message: str) -> str:
        from envs.echo.models import EchoAction

        result = self._step(EchoAction(message=message))
        return result.observation.echoed_message


# The demo model was trained on this exact tool description (worker.demo_model.conversations).
EchoAdapter.echo.__doc__ = ECHO_TOOL_DOCSTRING
