"""The one registry of the bundled environments: their servers and their training adapters.

`BUNDLED` is the table, keyed by the bundled server's key: the server process that
webapp.catalog.bundled starts (app, default port, capacity) and, where one is written for
it, the training adapter (`ADAPTERS` is that column). Adapter classes are named by dotted
path so that the web process never imports the worker's training code; nothing here
imports Django.

A bundled adapter applies only to a server that really is that bundled server, never to
one that merely reports the same name (`bundled_match`): it must publish envlab's marker
(`GET /envlab` -> `{"envlab_bundled": "<key>", "version": ...}`, see envs/<key>/server.py)
AND its `/schema` action must be the one the adapter speaks. Any other server, whatever
its name, gets the adapter generated from its `/schema` or MCP `tools/list`. The decision
is made at registration and stored in the row's metadata (`style`, and `adapter` for a
bundled one); the worker reads it back (`recorded_adapter`), not the name.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AdapterSpec:
    key: str
    adapter_path: str
    tool_names: tuple[str, ...]
    # The `/schema` action the adapter speaks: its title and its fields (less `metadata`).
    action_title: str
    action_fields: tuple[str, ...]


HOST = "127.0.0.1"  # where the bundled servers listen


@dataclass(frozen=True)
class BundledSpec:
    """One bundled server: its process (started by webapp.catalog.bundled) and its adapter."""

    key: str
    title: str
    kind: str  # Environment.Kind: "openenv" or "ors"
    # The argument that names the server in its command line (checked in /proc/<pid>/cmdline).
    marker: str
    default_capacity: int
    # Where `envlab_setup` puts it when the port is free, so URLs are stable across restarts.
    default_port: int
    command: Callable[[int], list[str]]
    # The adapter written for it; None where the worker generates one from what the server
    # describes (mcpdemo) or trains through the ORS adapter.
    adapter: AdapterSpec | None = None


def uvicorn_command(app: str) -> Callable[[int], list[str]]:
    def build(port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "uvicorn",
            app,
            "--host",
            HOST,
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]

    return build


def _ors_command(port: int) -> list[str]:
    return [sys.executable, "-m", "envs.ors.server", "--host", HOST, "--port", str(port)]


def _openenv(
    key: str, title: str, port: int, capacity: int, adapter: AdapterSpec | None = None
) -> BundledSpec:
    app = f"envs.{key}.server:app"
    return BundledSpec(key, title, "openenv", app, capacity, port, uvicorn_command(app), adapter)


BUNDLED: dict[str, BundledSpec] = {
    spec.key: spec
    for spec in (
        _openenv("echo", "Echo", 8101, 64, AdapterSpec(
            "echo", "envs.adapters.echo.EchoAdapter", ("echo",), "EchoAction", ("message",)
        )),
        _openenv("wordle", "Wordle", 8102, 64, AdapterSpec(
            "wordle", "envs.adapters.wordle.WordleAdapter", ("guess",), "WordleAction", ("guess",)
        )),
        _openenv("catch", "Catch", 8103, 64, AdapterSpec(
            "catch", "envs.adapters.catch.CatchAdapter", ("move", "stay"), "CatchAction",
            ("direction",),
        )),
        _openenv("sudoku", "Sudoku", 8104, 64, AdapterSpec(
            "sudoku", "envs.adapters.sudoku.SudokuAdapter", ("place",), "SudokuAction",
            ("row", "column", "digit"),
        )),
        _openenv("mcpdemo", "MCP demo", 8105, 64),
        # The ORS server does not read MAX_CONCURRENT_ENVS; its capacity is a declared budget.
        BundledSpec(
            "ors",
            "Open Reward Standard (echo, guessnumber)",
            "ors",
            "envs.ors.server",
            64,
            8106,
            _ors_command,
        ),
    )
}

# The adapters column of the table: the bundled servers the worker has an adapter for.
ADAPTERS: dict[str, AdapterSpec] = {
    spec.key: spec.adapter for spec in BUNDLED.values() if spec.adapter is not None
}

# Where the bundled servers publish their marker, and its field naming the bundled key.
MARKER_PATH = "/envlab"
MARKER_FIELD = "envlab_bundled"


def bundled_match(marker: Any, schema: Any) -> AdapterSpec | None:
    """The bundled adapter for a server that is that bundled server, else None.

    `marker`: the server's `GET /envlab` answer (None when it has none); `schema`: its
    `GET /schema`. Both must agree: the marker names a registered adapter and the action
    has exactly that adapter's title and fields. The reported name plays no part.
    """
    key = marker.get(MARKER_FIELD) if isinstance(marker, Mapping) else None
    spec = ADAPTERS.get(key) if isinstance(key, str) else None
    action = schema.get("action") if isinstance(schema, Mapping) else None
    if spec is None or not isinstance(action, Mapping):
        return None
    properties = action.get("properties")
    fields = set(properties) - {"metadata"} if isinstance(properties, Mapping) else set()
    if action.get("title") != spec.action_title or fields != set(spec.action_fields):
        return None
    return spec


def recorded_adapter(metadata: Mapping[str, Any] | None) -> AdapterSpec | None:
    """The bundled adapter that registration chose for an environment row, if it chose one
    (`metadata["style"] == "bundled"` and `metadata["adapter"]` a registered key)."""
    metadata = metadata or {}
    if metadata.get("style") != "bundled":
        return None
    key = metadata.get("adapter")
    return ADAPTERS.get(key) if isinstance(key, str) else None


def adapter_key(metadata_name: str) -> str:
    """'EchoEnvironment', 'echo_env', 'Echo' -> 'echo'."""
    name = re.sub(r"[^a-z0-9]", "", (metadata_name or "").lower())
    return re.sub(r"(environment|env)$", "", name) or name


def adapter_for(metadata_name: str) -> AdapterSpec | None:
    """A bundled adapter by name, for callers that know the server is that bundled one (tests,
    bench). Never for a server someone registered: see `bundled_match`."""
    return ADAPTERS.get(adapter_key(metadata_name))


def tool_name_for(metadata_name: str) -> str:
    spec = adapter_for(metadata_name)
    return spec.tool_names[0] if spec else "step"
