"""Environment adapters: what TRL's `environment_factory` gets for each environment."""

from __future__ import annotations

import importlib
from typing import Any

from webapp.catalog.adapters import adapter_for


def adapter_class(*, metadata_name: str, base_url: str, env_name: str) -> type[Any]:
    """A no-argument-constructible subclass of the registered adapter, bound to one server."""
    spec = adapter_for(metadata_name)
    if spec is None:
        raise ValueError(f"no training adapter for environment '{metadata_name}'")
    module_name, _, class_name = spec.adapter_path.rpartition(".")
    base = getattr(importlib.import_module(module_name), class_name)
    return type(base.__name__, (base,), {"base_url": base_url, "env_name": env_name})
