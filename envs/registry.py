"""The one registry of the bundled environments: every `envs/<key>/lab.py` spec, collected.

Each bundled environment's folder declares what it is in one `BundledSpec` (envs/spec.py):
the server process webapp.catalog.bundled starts (app, default port, capacity), the training
adapter, the solver, its episodes' attributes and their ranges, its default prompt, its
evaluation columns and its replay renderer. `BUNDLED` holds them by key, in `BUNDLED_KEYS`
order, then any added through `register` / `register_folder` (a plugin: an environment that
lives outside envs/, in a folder with a `lab.py` of its own). Every other table about an
environment is a lookup here. Adapter classes and solvers are named by dotted path so that
the web process never imports the worker's training code; nothing here imports Django, and
the `lab.py` files are loaded by path so that their packages' openenv clients stay unloaded.

A bundled adapter applies only to a server that really is that bundled server, never to
one that merely reports the same name (`bundled_match`): it must publish envlab's marker
(`GET /envlab` -> `{"envlab_bundled": "<key>", "version": ...}`, see envs/<key>/server.py)
AND its `/schema` action must be the one the adapter speaks. Any other server, whatever
its name, gets the adapter generated from its `/schema` or MCP `tools/list`. The decision
is made at registration and stored in the row's metadata (`style`, and `adapter` for a
bundled one); the worker reads it back (`recorded_adapter`), not the name.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from envs.spec import (
    COMMON_ATTRIBUTES,
    HOST,
    AdapterSpec,
    Attribute,
    BundledSpec,
    Column,
    Range,
    uvicorn_command,
)

__all__ = [
    "ADAPTERS", "BUNDLED", "BUNDLED_KEYS", "HOST", "MARKER_FIELD", "MARKER_PATH", "PLUGINS_VAR",
    "AdapterSpec", "BundledSpec", "RegistryError", "SpecTable", "adapter_for", "adapter_key",
    "bundled_match", "default_prompt", "environment_attributes", "evaluation_columns",
    "load_lab", "recorded_adapter", "register", "register_folder", "renderer_name",
    "solver_keys", "solver_path", "tool_name_for", "uvicorn_command",
]  # fmt: skip

ENVS_DIR = Path(__file__).resolve().parent
# The environments that ship with the lab, in the order pages and `envlab_setup` list them.
BUNDLED_KEYS = ("echo", "wordle", "catch", "sudoku", "mcpdemo", "ors")
# Folders of further environments to register at import (os.pathsep-separated), so that
# every process of an installation (web, workers, `envlab_setup`) knows the same plugins.
PLUGINS_VAR = "ENVLAB_ENVIRONMENTS"
LAB_FILE = "lab.py"
_KEY = re.compile(r"^[a-z][a-z0-9]{0,31}$")


class RegistryError(ValueError):
    """A spec or a folder cannot be registered; the message says what to fix."""


BUNDLED: dict[str, BundledSpec] = {}
# The adapters column of the table: the bundled servers the worker has an adapter for.
ADAPTERS: dict[str, AdapterSpec] = {}


def register(spec: BundledSpec) -> BundledSpec:
    """Add one environment to the registry (the public hook for an environment that lives
    outside envs/). Registering the same spec again changes nothing; another spec under a
    key, port or marker already taken is refused, as the tables would then disagree."""
    if not isinstance(spec, BundledSpec):
        raise RegistryError(f"a lab spec must be an envs.spec.BundledSpec, got {type(spec).__name__}")
    if not _KEY.match(spec.key):
        raise RegistryError(f"environment key {spec.key!r} must be 1-32 lowercase letters or digits, "
                            "starting with a letter (it names a replay script and a log file)")
    if BUNDLED.get(spec.key) is spec:
        return spec
    for other in BUNDLED.values():
        clash = [what for what, mine, theirs in (
            ("key", spec.key, other.key), ("port", spec.default_port, other.default_port),
            ("marker", spec.marker, other.marker)) if mine == theirs]
        if clash:
            raise RegistryError(f"environment '{spec.key}' has the {clash[0]} of '{other.key}'")
    if spec.adapter is not None and spec.adapter.key != spec.key:
        raise RegistryError(f"environment '{spec.key}' names an adapter keyed '{spec.adapter.key}'")
    BUNDLED[spec.key] = spec
    if spec.adapter is not None:
        ADAPTERS[spec.key] = spec.adapter
    return spec


def load_lab(folder: Path | str) -> BundledSpec:
    """The spec `<folder>/lab.py` declares as `LAB`, loaded by path: the folder need not be
    an importable package, and importing its package (openenv clients) is not paid."""
    path = Path(folder).resolve() / LAB_FILE
    if not path.is_file():
        raise RegistryError(f"{path} does not exist: an environment folder declares itself in {LAB_FILE}")
    name = f"envlab_lab_{path.parent.name}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise RegistryError(f"{path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    # In sys.modules while it runs, as a normal import would be (dataclasses and pickling of
    # what it defines look their module up there).
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    spec = getattr(module, "LAB", None)
    if not isinstance(spec, BundledSpec):
        raise RegistryError(f"{path} must define LAB, an envs.spec.BundledSpec")
    return spec


# Folder -> the key its lab.py registered: a folder named twice (ENVLAB_ENVIRONMENTS and a
# caller, say) is loaded once, as a second load would make a distinct spec with the same key.
_FOLDERS: dict[Path, str] = {}


def register_folder(folder: Path | str) -> BundledSpec:
    """Register the environment whose `lab.py` is in `folder` (once: again, the same spec)."""
    path = Path(folder).resolve()
    known = BUNDLED.get(_FOLDERS.get(path, ""))
    if known is not None:
        return known
    spec = register(load_lab(path))
    _FOLDERS[path] = spec.key
    return spec


for _key in BUNDLED_KEYS:
    register_folder(ENVS_DIR / _key)
for _folder in filter(None, os.environ.get(PLUGINS_VAR, "").split(os.pathsep)):
    register_folder(_folder)


# --- lookups: what the registry says about one environment key ---------------------------------

V = TypeVar("V")


class SpecTable(Mapping[str, V]):
    """A read-only table keyed like BUNDLED, one column of the specs, read live (so an
    environment registered later is in it): the keys whose spec has something to say
    (`column` returns non-None), then `extra` (tables that also hold non-bundled kinds)."""

    def __init__(self, column: Callable[[BundledSpec], V | None], extra: Mapping[str, V] | None = None) -> None:
        self._column = column
        self._extra = dict(extra or {})

    def _items(self) -> dict[str, V]:
        found = {key: value for key, spec in BUNDLED.items() if (value := self._column(spec)) is not None}
        return {**found, **self._extra}

    def __getitem__(self, key: str) -> V:
        return self._items()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        return f"SpecTable({self._items()!r})"


def solver_path(key: str) -> str | None:
    """The dotted path of the solver of bundled environment `key`, else None."""
    spec = BUNDLED.get(key)
    return spec.solver if spec is not None else None


def solver_keys() -> tuple[str, ...]:
    return tuple(key for key, spec in BUNDLED.items() if spec.solver is not None)


def environment_attributes(key: str) -> tuple[Attribute, ...]:
    spec = BUNDLED.get(key)
    return spec.attributes if spec is not None else COMMON_ATTRIBUTES


def attribute_ranges(key: str) -> Mapping[str, Range]:
    spec = BUNDLED.get(key)
    return spec.ranges if spec is not None else {}


def default_prompt(key: str) -> str | None:
    spec = BUNDLED.get(key)
    return spec.prompt if spec is not None else None


def evaluation_columns(key: str) -> tuple[Column, ...]:
    spec = BUNDLED.get(key)
    return spec.columns if spec is not None else ()


def renderer_name(key: str) -> str | None:
    spec = BUNDLED.get(key)
    return spec.renderer if spec is not None else None


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
