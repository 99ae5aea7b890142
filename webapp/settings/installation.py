"""Secrets kept per installation for `make run` (the local settings): a random key written
once to `var/` with mode 600, the same for every process that reads it afterwards.

Imports nothing of Django: the settings read it while they are being built.
"""

from __future__ import annotations

import os
import secrets
import stat
import time
from collections.abc import Callable
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def _owned(path: Path) -> bool:
    try:
        return path.stat().st_uid == os.geteuid()
    except OSError:
        return False


def make_private(path: Path, mode: int = PRIVATE_FILE) -> None:
    """Take group and other permissions off `path` when this user owns it (a no-op otherwise,
    and on a file system that keeps no modes)."""
    if not _owned(path):
        return
    try:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            path.chmod(mode)
    except OSError:
        pass


def installation_secret(path: Path, make: Callable[[], str] = lambda: secrets.token_urlsafe(50)) -> str:
    """The secret stored at `path`, written there first (mode 600) if there is none yet.

    Written to a private temporary file and then linked into place, which fails when the name
    exists: two processes starting at once both end up with the first one's secret, and a
    reader never sees a half-written file.
    """
    for _ in range(50):
        try:
            value = path.read_text().strip()
        except FileNotFoundError:
            value = ""
        if value:
            make_private(path)
            return value
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
            try:
                os.write(fd, (make() + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another process was first: read its secret
            finally:
                temporary.unlink(missing_ok=True)
            continue
        time.sleep(0.02)  # an empty file someone else is about to fill: should not happen
    raise RuntimeError(f"{path} exists but is empty; delete it and start again")
