"""Echo environment: the agent must repeat a target phrase exactly.

The server lives in ``envs.echo.server`` (imports FastAPI); clients only need
``envs.echo.client`` and ``envs.echo.models``.
"""

from envs.echo.client import EchoEnv, open_echo_env
from envs.echo.models import EchoAction, EchoObservation, EchoState

__all__ = ["EchoAction", "EchoEnv", "EchoObservation", "EchoState", "open_echo_env"]
