"""Where demo models live, and whether one is ready to load."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DEMO_PREFIX = "demo:"
MANIFEST_NAME = "envlab_demo.json"
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")


def demo_model_path(name: str, root: Path) -> Path:
    """The folder under `root` for a demo model named `demo:<name>` (or bare `<name>`).

    Names are lowercase letters, digits and dashes (not at either end, at most 64
    characters), so a name can never step outside `root`."""
    bare = name.removeprefix(DEMO_PREFIX)
    if not _NAME.fullmatch(bare):
        raise ValueError(
            f"invalid demo model name {name!r}: use 'demo:' followed by 1-64 lowercase letters, "
            "digits or dashes, starting and ending with a letter or digit (e.g. 'demo:echo')"
        )
    return Path(root) / bare


def is_built(path: Path) -> bool:
    """True once a build finished: the manifest is the last file a build writes, and the
    folder only appears (by rename) after it."""
    return (Path(path) / MANIFEST_NAME).is_file()


def read_manifest(path: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((Path(path) / MANIFEST_NAME).read_text(encoding="utf-8"))
    return manifest
