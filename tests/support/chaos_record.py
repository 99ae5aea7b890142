"""Where the chaos rows go (no Django here: scripts/chaos.py reads them without settings)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RECORD_ENV = "ENVLAB_CHAOS_RECORD"


def append_row(row: dict[str, Any]) -> None:
    """Append to the file ENVLAB_CHAOS_RECORD names; a no-op when it is not set."""
    target = os.environ.get(RECORD_ENV)
    if not target:
        return
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(row) + "\n")


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
