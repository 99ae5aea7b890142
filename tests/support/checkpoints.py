"""Checkpoint folders as a save, or a kill during one, leaves them on disk."""

from __future__ import annotations

from pathlib import Path


def checkpoint_folder(folder: Path, files: dict[str, str]) -> Path:
    """Make `folder` (and its parents) with an empty config.json and `files` (name: text): a
    marker, or a trainer state cut short, is what tells a whole save from a torn one."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder
