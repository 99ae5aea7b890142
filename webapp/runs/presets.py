"""Presets: named, versioned starting configs for a run, kept as data (webapp/runs/preset_data/
<slug>.json), each a plain run config with a description and where its recipe comes from.

A preset names the environment it is meant for by its bundled key ("echo") rather than an id,
which differs per user: `preset_config` fills in the id of the user's entry. Every preset is
validated by the run config schema when it is loaded, so a broken file fails loudly (and in
the tests), never at a user's launch.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User

from webapp.catalog.models import Environment
from webapp.catalog.selectors import environments_visible_to
from webapp.runs.config import RunConfigError, parse_run_config

PRESET_DIR = Path(__file__).resolve().parent / "preset_data"
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# Stands in for the environment's id while a preset is checked: any id passes the schema.
_CHECK_ID = 1


@dataclass(frozen=True)
class Preset:
    slug: str
    name: str
    version: int
    description: str
    source: str
    environment: str  # the bundled environment it is meant for
    config: dict[str, Any]  # a run config without environment ids


class PresetError(ValueError):
    """A preset file that is not a valid preset (a bug in the data, caught at load)."""


def _load(path: Path) -> Preset:
    data = json.loads(path.read_text())
    slug = path.stem
    if not SLUG_RE.fullmatch(slug):
        raise PresetError(f"{path.name}: a preset's file name is a slug")
    expected = {"name", "version", "description", "source", "environment", "config"}
    if set(data) != expected:
        raise PresetError(f"{path.name}: a preset has exactly {sorted(expected)}")
    if not isinstance(data["version"], int) or isinstance(data["version"], bool) or data["version"] < 1:
        raise PresetError(f"{path.name}: version is a whole number from 1")
    preset = Preset(slug=slug, **data)
    try:
        parse_run_config(fill_environment(preset.config, _CHECK_ID))
    except RunConfigError as exc:
        raise PresetError(f"{path.name}: not a valid run config: {exc.errors}") from None
    return preset


def fill_environment(config: dict[str, Any], environment_id: int) -> dict[str, Any]:
    """The config with `environment_id` as every environment's id."""
    return {
        **config,
        "environments": [{"environment": environment_id, **item} for item in config.get("environments", [])],
    }


@functools.cache
def presets() -> tuple[Preset, ...]:
    """Every preset, by name."""
    return tuple(sorted((_load(path) for path in PRESET_DIR.glob("*.json")), key=lambda p: p.name.lower()))


def preset_get(*, slug: str) -> Preset | None:
    return next((preset for preset in presets() if preset.slug == slug), None)


def bundled_environment(*, user: User, key: str) -> Environment | None:
    """The bundled server `key`'s entry that `user` may use, else an entry named `key` of their
    own: never another user's entry of that name, which its owner could point anywhere."""
    visible = environments_visible_to(user=user)
    bundled = visible.filter(metadata__bundled=key).order_by("pk").first()
    return bundled or visible.filter(name=key, owner=user).first()


def preset_config_for(*, preset: Preset, user: User) -> dict[str, Any]:
    """The preset's run config on `user`'s entry of its environment (id 0, which the launch
    refuses naming the field, when they have none)."""
    environment = bundled_environment(user=user, key=preset.environment)
    return fill_environment(preset.config, environment.pk if environment is not None else 0)
