"""Typed reads of environment variables, for the settings and the worker.

A bad value fails at import with the variable's name and the value it had, not with a bare
`int()` traceback from deep in the settings. This module imports nothing of Django: the
worker's training processes read it before (or without) `django.setup()`.
"""

from __future__ import annotations

import os
from pathlib import Path

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


class EnvironmentVariableError(ValueError):
    """A variable is set to a value its setting cannot take (Django's ImproperlyConfigured in
    spirit; a ValueError so that code outside Django can catch it too)."""


def _raw(name: str) -> str | None:
    return os.environ.get(name)


def env_str(name: str, default: str) -> str:
    value = _raw(name)
    return default if value is None else value


def env_int(name: str, default: int) -> int:
    value = _raw(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise EnvironmentVariableError(f"{name} must be a whole number, got {value!r}") from None


def env_float(name: str, default: float) -> float:
    value = _raw(name)
    if value is None:
        return float(default)
    try:
        return float(value)
    except ValueError:
        raise EnvironmentVariableError(f"{name} must be a number, got {value!r}") from None


def env_bool(name: str, default: bool) -> bool:
    """1/true/yes/on or 0/false/no/off, any case; anything else is refused rather than read
    as off (a mistyped `DEBUG=ture` or `ENVLAB_SSL_REDIRECT=flase` should not pass quietly)."""
    value = _raw(name)
    if value is None:
        return default
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise EnvironmentVariableError(
        f"{name} must be 1 or 0 (or true/false, yes/no, on/off), got {value!r}"
    )


def env_path(name: str, default: Path) -> Path:
    value = _raw(name)
    return default if value is None else Path(value)


def default_var_dir(base: Path) -> Path:
    """Where the lab keeps its state (database, runs, models, logs) when ENVLAB_VAR_DIR is not
    set: the clone's `var/` when the code runs from a checkout (manage.py beside webapp/),
    else, installed from a wheel, the user's data folder (platformdirs: ~/.local/share/envlab
    on Linux, honouring XDG_DATA_HOME), never site-packages."""
    if (base / "manage.py").is_file():
        return base / "var"
    import platformdirs

    return Path(platformdirs.user_data_dir("envlab", appauthor=False))


def env_list(name: str, default: str = "") -> list[str]:
    """A comma-separated list; blanks around and between items are dropped."""
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]
