"""Where `envlab login` keeps the lab's URL and token: `login.json` in the user's config
directory (platformdirs; ENVLAB_CONFIG_DIR overrides it), mode 0600. ENVLAB_URL and
ENVLAB_TOKEN, where set, win over the file."""

from __future__ import annotations

import json
import os
from pathlib import Path

from envlab_client.client import EnvlabError


def config_dir() -> Path:
    override = os.environ.get("ENVLAB_CONFIG_DIR")
    if override:
        return Path(override)
    from platformdirs import user_config_dir

    return Path(user_config_dir("envlab", appauthor=False))


def login_path() -> Path:
    return config_dir() / "login.json"


def save_login(url: str, token: str) -> Path:
    """Write the login readable by its user alone: the file is made 0600 before the token is
    written into it, never widened afterwards."""
    path = login_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # an older file keeps its mode through O_CREAT
    with os.fdopen(descriptor, "w") as file:
        json.dump({"url": url.rstrip("/"), "token": token}, file)
    return path


def load_login() -> tuple[str, str]:
    url, token = os.environ.get("ENVLAB_URL"), os.environ.get("ENVLAB_TOKEN")
    if url and token:
        return url, token
    path = login_path()
    try:
        stored = json.loads(path.read_text())
    except FileNotFoundError:
        raise EnvlabError("not logged in: run `envlab login` (or set ENVLAB_URL and ENVLAB_TOKEN)") from None
    except (OSError, ValueError) as exc:
        raise EnvlabError(f"cannot read {path}: {exc}; run `envlab login` again") from None
    return url or stored["url"], token or stored["token"]
