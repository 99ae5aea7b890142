"""The echo environment as TRL sees it: one `echo(message)` tool, reward kept on the instance.

Adapter modules import openenv lazily: the web process reads their tool descriptions
(webapp.catalog.toolschema) and must not pay openenv's multi-second import.
"""

from __future__ import annotations

from typing import Any

from worker.adapters.base import OpenEnvAdapter
from worker.demo_model.conversations import ECHO_TOOL_DOCSTRING


class EchoAdapter(OpenEnvAdapter):
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


# The demo model was trained on this exact tool description (see worker.demo_model).
EchoAdapter.echo.__doc__ = ECHO_TOOL_DOCSTRING
