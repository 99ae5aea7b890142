"""The one registry of training adapters: which environments the worker can train on.

Keyed by the environment's reported metadata name (normalised). Values name the adapter
class by dotted path so that the web process never imports the worker's training code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class AdapterSpec:
    key: str
    adapter_path: str
    tool_names: tuple[str, ...]


ADAPTERS: dict[str, AdapterSpec] = {
    "echo": AdapterSpec("echo", "worker.adapters.echo.EchoAdapter", ("echo",)),
    "wordle": AdapterSpec("wordle", "worker.adapters.wordle.WordleAdapter", ("guess",)),
    "catch": AdapterSpec("catch", "worker.adapters.catch.CatchAdapter", ("move", "stay")),
    "sudoku": AdapterSpec("sudoku", "worker.adapters.sudoku.SudokuAdapter", ("place",)),
}


def adapter_key(metadata_name: str) -> str:
    """'EchoEnvironment', 'echo_env', 'Echo' -> 'echo'."""
    name = re.sub(r"[^a-z0-9]", "", (metadata_name or "").lower())
    return re.sub(r"(environment|env)$", "", name) or name


def adapter_for(metadata_name: str) -> AdapterSpec | None:
    return ADAPTERS.get(adapter_key(metadata_name))


def tool_name_for(metadata_name: str) -> str:
    spec = adapter_for(metadata_name)
    return spec.tool_names[0] if spec else "step"
