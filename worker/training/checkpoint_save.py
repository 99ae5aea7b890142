"""Checkpoints that are whole or absent (webapp/runs/checkpoints.py says how they are read).

transformers' Trainer writes `checkpoint-<step>` file by file where it will stay, so a worker
killed mid-save, or a disk that fills, leaves a folder that looks like a checkpoint and is not
one; a resume from it fails or trains from torn weights. Here every trainer the lab builds
saves through `AtomicCheckpoints`: the Trainer writes into a staging folder; every file and
folder is fsynced; the marker is written last (and fsynced); the staging folder is renamed into
place and the run folder fsynced. A save that fails on the disk (full, quota, I/O) removes its
staging folder, tells the run (a `checkpoint_failed` event) and training goes on: the previous
checkpoint stays the one a resume uses, and the next save tries again.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from envs.adapters.activity import ACTIVITY, CHECKPOINT_SAVE
from webapp.runs.checkpoints import (
    CHECKPOINT_MARKER,
    STAGING_PREFIX,
    checkpoint_leftovers,
    newest_complete_checkpoint,
)

log = logging.getLogger(__name__)

# What the writers of a checkpoint raise when the disk refuses: OSError from Python's own
# files, SafetensorError ("... (os error 28)") from the weights, and from torch.save a bare
# RuntimeError ("unexpected pos ...") whose context is "basic_ios::clear: iostream error".
_DISK_TEXT = re.compile(r"No space left|os error \d+|I/O error|iostream error|Disk quota|Read-only file system", re.I)


def disk_failure(exc: BaseException) -> bool:
    """Whether `exc` (or what it was raised from) is the disk refusing a write."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) or _DISK_TEXT.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> dict[str, int]:
    """fsync every file and folder under `root` (folders after their contents); returns each
    file's size by its path relative to `root`."""
    sizes: dict[str, int] = {}
    for folder, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            path = Path(folder) / name
            fsync_path(path)
            sizes[str(path.relative_to(root))] = path.stat().st_size
        fsync_path(Path(folder))
    return sizes


def commit_folder(staging: Path, target: Path, *, step: int) -> None:
    """Make the fully written `staging` the checkpoint `target`: fsync it, write the marker
    last, rename it into place, fsync the parent so that the rename itself survives a crash."""
    sizes = fsync_tree(staging)
    marker = staging / CHECKPOINT_MARKER
    with open(marker, "w", encoding="utf-8") as out:
        json.dump({"step": step, "saved_at": datetime.now(tz=UTC).isoformat(), "files": sizes}, out)
        out.flush()
        os.fsync(out.fileno())
    fsync_path(staging)
    if target.exists():  # a checkpoint of this step from a timeline a resume threw away
        shutil.rmtree(target)
    os.replace(staging, target)
    fsync_path(target.parent)


def remove_leftovers(output_dir: Path) -> list[dict[str, Any]]:
    """Remove what saves cut short left in the run folder; returns what was removed."""
    removed = []
    for step, path in checkpoint_leftovers(output_dir):
        shutil.rmtree(path, ignore_errors=True)
        removed.append({"step": step, "folder": path.name})
    return removed


class AtomicCheckpoints:
    """Mixed into a transformers Trainer (GRPOTrainer, AsyncGRPOTrainer) before it: its
    `_save_checkpoint` writes whole checkpoints or none. The Trainer and TRL find the folder they
    write through `_get_output_dir`, which points at the staging root during a save.

    `envlab_sink`: the run's telemetry sink, told of a failed save (None: only logged).
    The Trainer's checkpoint rotation runs on the staging root, where it sees one checkpoint:
    the lab sets no `save_total_limit` (worker/training/grpo_args.py), so a run keeps all of them."""

    envlab_sink: Any = None
    _envlab_staging: Path | None = None

    def _get_output_dir(self, trial: Any) -> str:
        if self._envlab_staging is not None:
            return str(self._envlab_staging)
        return super()._get_output_dir(trial)  # type: ignore[misc]

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        # What a stalled run is stuck in (worker/training/stall.py), until the save ends.
        with ACTIVITY.doing(CHECKPOINT_SAVE):
            self._envlab_save_checkpoint(model, trial)

    def _envlab_save_checkpoint(self, model: Any, trial: Any) -> None:
        trainer: Any = self
        root = Path(super()._get_output_dir(trial))  # type: ignore[misc]
        step = int(trainer.state.global_step)
        name = f"checkpoint-{step}"
        # One name for every process of a run: each writes its own RNG state into it.
        staging = root / f"{STAGING_PREFIX}{name}"
        main = bool(trainer.args.should_save)
        failure: BaseException | None = None
        if main:
            shutil.rmtree(staging, ignore_errors=True)
        trainer.accelerator.wait_for_everyone()
        self._envlab_staging = staging
        try:
            staging.mkdir(parents=True, exist_ok=True)
            super()._save_checkpoint(model, trial)  # type: ignore[misc]
        except Exception as exc:
            if not disk_failure(exc):
                raise
            failure = exc
        finally:
            self._envlab_staging = None
        trainer.accelerator.wait_for_everyone()
        if not main:
            return
        if failure is None:
            try:
                commit_folder(staging / name, root / name, step=step)
            except Exception as exc:
                if not disk_failure(exc):
                    raise
                failure = exc
        shutil.rmtree(staging, ignore_errors=True)
        if failure is not None:
            self._envlab_save_failed(root, step, failure)

    def _envlab_save_failed(self, root: Path, step: int, exc: BaseException) -> None:
        try:
            free: int | None = shutil.disk_usage(root).free
        except OSError:
            free = None
        previous = newest_complete_checkpoint(root, up_to=step - 1)
        full = "No space left" in _chain_text(exc) or "os error 28" in _chain_text(exc) or free == 0
        why = "the disk is full" if full else "the disk refused the write"
        kept = f"step {previous[0]}'s checkpoint stays the newest" if previous else "the run has no checkpoint yet"
        message = (
            f"The checkpoint at step {step} could not be saved: {why} ({_chain_text(exc)[:300]}; "
            f"{free if free is not None else 'unknown'} bytes free in {root}). Nothing of it was kept; "
            f"{kept}. Training goes on and the next save tries again."
        )
        log.error("checkpoint at step %s failed: %s", step, message)
        sink = self.envlab_sink
        if sink is not None:
            sink.run_event(
                "checkpoint_failed", message,
                {"step": step, "disk_full": full, "free_bytes": free, "kept_step": previous[0] if previous else None},
            )


def _chain_text(exc: BaseException) -> str:
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)
