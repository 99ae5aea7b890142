"""One adapter class for a run over several environments.

TRL gets a single `environment_factory`: this router. It exposes the tools of every
environment in the run, sends `reset(**row)` to the environment named by the row's `env`
column, and refuses, with a message the model can read, a tool that belongs to another
environment. The current environment's attributes (`reward`, `lost`, `won`, ...) read
through, so reward terms see the episode's own environment.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

from envs.adapters import toolstats
from envs.adapters.tool_metrics import TOOL_NOT_FOUND, safe_tool_name


class ToolConflict(ValueError):
    """Two environments of a run define a tool of the same name with other arguments."""


def public_tools(cls: type) -> dict[str, Callable[..., Any]]:
    """The methods TRL turns into tools: every public function other than `reset`."""
    return {
        name: member
        for name, member in inspect.getmembers(cls, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


def _tool_shape(func: Callable[..., Any]) -> tuple[Any, ...]:
    signature = inspect.signature(func)
    hints = typing.get_type_hints(func)
    return tuple((p.name, p.kind, p.default, hints.get(p.name)) for p in signature.parameters.values())


def router_class(members: Mapping[str, type]) -> type:
    """A router over `members` (environment name within the run -> bound adapter class)."""
    if not members:
        raise ValueError("a router needs at least one environment")
    owners: dict[str, list[str]] = {}
    templates: dict[str, Callable[..., Any]] = {}
    for env_name, cls in members.items():
        for tool_name, func in public_tools(cls).items():
            if tool_name in templates and _tool_shape(templates[tool_name]) != _tool_shape(func):
                raise ToolConflict(
                    f"environments {owners[tool_name][0]!r} and {env_name!r} both have a tool "
                    f"'{tool_name}' with different arguments; one run cannot offer both"
                )
            templates.setdefault(tool_name, func)
            owners.setdefault(tool_name, []).append(env_name)

    namespace: dict[str, Any] = {
        "members": dict(members),
        "tool_owners": {name: tuple(envs) for name, envs in owners.items()},
        "__init__": _init,
        "reset": _reset,
        "__getattr__": _getattr,
        "_current": _current,
        "__doc__": "Routes each episode to its environment: " + ", ".join(members),
    }
    for tool_name, template in templates.items():
        namespace[tool_name] = _route(tool_name, template)
    return type("EnvironmentRouter", (), namespace)


def _init(self: Any) -> None:
    self._instances = {}
    self.env_name = ""


def _reset(self: Any, **row: Any) -> str | None:
    env_name = row.get("env")
    cls = self.members.get(env_name)
    if cls is None:
        raise ValueError(f"row names environment {env_name!r}; this run has {sorted(self.members)}")
    # An idle session elsewhere still holds one of that server's capacity slots.
    for other_name, other in self._instances.items():
        if other_name != env_name and hasattr(other, "_close"):
            other._close()  # noqa: SLF001 - public adapter methods are the model's tools
    instance = self._instances.get(env_name)
    if instance is None:
        instance = self._instances[env_name] = cls()
    self.env_name = env_name
    return instance.reset(**row)


def _current(self: Any) -> Any:
    instance = self._instances.get(self.env_name)
    if instance is None:
        raise RuntimeError("no episode in progress: reset() first")
    return instance


def _getattr(self: Any, name: str) -> Any:
    # Only called for names the router itself lacks: read the episode's environment.
    if name.startswith("__") or name in ("_instances", "env_name"):
        raise AttributeError(name)
    instances = self.__dict__.get("_instances") or {}
    instance = instances.get(self.__dict__.get("env_name"))
    if instance is None:
        raise AttributeError(name)
    return getattr(instance, name)


def _route(tool_name: str, template: Callable[..., Any]) -> Callable[..., Any]:
    def tool(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.env_name not in self.tool_owners[tool_name]:
            # No adapter runs: counted here (envs/adapters/toolstats.py), as the tool this episode lacks.
            toolstats.record(safe_tool_name(tool_name), None, TOOL_NOT_FOUND)
            own = sorted(public_tools(self.members[self.env_name])) if self.env_name in self.members else []
            raise ValueError(
                f"Tool '{tool_name}' belongs to {', '.join(self.tool_owners[tool_name])}; this episode is in "
                f"'{self.env_name}', whose tools are: {', '.join(own) or 'none'}."
            )
        return getattr(self._current(), tool_name)(*args, **kwargs)

    # TRL describes the tool from these (name, docstring, signature, type hints).
    tool.__name__ = tool_name
    tool.__qualname__ = f"EnvironmentRouter.{tool_name}"
    tool.__doc__ = template.__doc__
    tool.__signature__ = inspect.signature(template)  # type: ignore[attr-defined]  # read by inspect (and TRL's schema), unknown to typeshed
    tool.__annotations__ = typing.get_type_hints(template)
    return tool
