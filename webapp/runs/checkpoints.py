"""A run's checkpoints on disk, and the one resolver of a `model` a run or an evaluation names.

A checkpoint is a folder the trainer wrote under RUNS_DIR/<run id>/: `checkpoint-<step>` from
GRPO (transformers' Trainer layout, with `trainer_state.json`), and the warm-up's result in
`warmup/model`, listed as step 0 (the model GRPO starts from). Only checkpoints up to the run's
recorded `checkpoint_step` count: a newer folder belongs to a timeline a resume threw away.

Whole or absent: the worker (worker/training/checkpoint_save.py) writes a checkpoint into a staging folder
(`.saving-checkpoint-<step>`), fsyncs every file, writes the marker `envlab-complete.json` last,
then renames the folder into place. Every reader here (the list, the page, the API, model
sources, resume) takes only complete checkpoints (checkpoint_complete); a staging folder, or a
checkpoint folder that is not complete, is what a kill during a save leaves, and the next
attempt removes it (checkpoint_leftovers). Folders written before the marker existed have none:
they count when their `trainer_state.json`, which transformers writes after the weights and the
optimizer, parses.

A `model` is a hub id, a local folder, `demo:<name>`, or `{"run": <id>, "checkpoint": <step> |
"last"}`. A checkpoint is reached through its run, so the run must be visible to the user
(webapp.runs.selectors.runs_visible_to); local folders and RUNS_DIR stay apart
(services.model_folder_error refuses a path into RUNS_DIR).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from django.conf import settings

from webapp.runs.config import CheckpointRef
from webapp.runs.models import Run
from webapp.runs.selectors import runs_visible_to

CHECKPOINT_DIR_RE = re.compile(r"^checkpoint-([0-9]{1,9})$")
CHECKPOINT_MARKER = "envlab-complete.json"
STAGING_PREFIX = ".saving-"
WARMUP_MODEL_DIR = Path("warmup") / "model"
ADAPTER_CONFIG = "adapter_config.json"  # what peft writes beside a LoRA adapter (worker/model_loading.py)
Phase = Literal["warmup", "grpo"]


@dataclass(frozen=True)
class Checkpoint:
    step: int
    phase: Phase
    created_at: datetime
    size_bytes: int
    path: Path
    adapter: bool = False  # a LoRA adapter alone (a run with `peft`), loaded on its base model

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "phase": self.phase,
            "created_at": self.created_at,
            "size_bytes": self.size_bytes,
            "adapter": self.adapter,
        }


class ModelRefError(ValueError):
    """A `model` that names nothing usable; the message says what to fix."""


@dataclass(frozen=True)
class ResolvedModel:
    """What `from_pretrained` takes (`source`: a folder or a hub id) and how to show it."""

    source: str
    label: str
    local: bool
    run_id: int | None = None
    checkpoint: int | None = None
    adapter: bool = False  # a LoRA adapter alone: `source` is its folder (adapter_config.json)

    def adapter_settings(self) -> dict[str, Any] | None:
        """The adapter's `r` and `lora_alpha` as peft recorded them; None for full weights
        or an adapter whose config cannot be read."""
        if not self.adapter:
            return None
        try:
            recorded = json.loads((Path(self.source) / ADAPTER_CONFIG).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(recorded, dict):
            return None
        return {"r": recorded.get("r"), "lora_alpha": recorded.get("lora_alpha")}


def run_dir(run_id: int) -> Path:
    return Path(settings.RUNS_DIR) / str(run_id)


def warmup_model_dir(run_id: int) -> Path:
    """Where a run's warm-up leaves its model (written whole, then renamed into place)."""
    return run_dir(run_id) / WARMUP_MODEL_DIR


def checkpoint_complete(path: Path, step: int) -> bool:
    """Whether `path` holds the whole checkpoint of `step`: its marker names that step (or, for a
    folder written before markers, its trainer state parses and names it)."""
    for name, field in ((CHECKPOINT_MARKER, "step"), ("trainer_state.json", "global_step")):
        try:
            text = (path / name).read_text(encoding="utf-8")
        except OSError:
            continue
        try:
            data = json.loads(text)
        except ValueError:
            return False  # cut short by a kill: whatever else is there is not trusted
        if name == CHECKPOINT_MARKER:
            return isinstance(data, dict) and data.get(field) == step
        # Before markers: transformers wrote the state after everything else; fakes in tests
        # and older folders may omit the step, so only a different step refuses it.
        return isinstance(data, dict) and data.get(field, step) == step
    return False


def checkpoint_leftovers(base: Path) -> list[tuple[int | None, Path]]:
    """What a save cut short left in the run folder `base`: staging folders and checkpoint
    folders that are not complete, with their step where the name gives one."""
    found: list[tuple[int | None, Path]] = []
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return found
    for entry in entries:
        if entry.name.startswith(STAGING_PREFIX) and entry.is_dir():
            match = CHECKPOINT_DIR_RE.fullmatch(entry.name.removeprefix(STAGING_PREFIX).split(".", 1)[0])
            found.append((int(match.group(1)) if match else None, entry))
            continue
        match = CHECKPOINT_DIR_RE.fullmatch(entry.name)
        if match is not None and entry.is_dir() and not checkpoint_complete(entry, int(match.group(1))):
            found.append((int(match.group(1)), entry))
    return found


def _checkpoint_folders(base: Path) -> list[tuple[int, Path]]:
    """The `checkpoint-<step>` entries of the run folder `base` with their steps, complete or
    not; none when the folder cannot be read (not made yet, or gone)."""
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    found: list[tuple[int, Path]] = []
    for entry in entries:
        match = CHECKPOINT_DIR_RE.fullmatch(entry.name)
        if match is not None:
            found.append((int(match.group(1)), entry))
    return found


def newest_complete_checkpoint(base: Path, *, up_to: int | None) -> tuple[int, Path] | None:
    """The newest complete GRPO checkpoint in the run folder `base` at or below step `up_to`,
    where a resume continues from (None: there is none, training starts over)."""
    if not up_to:
        return None
    best: tuple[int, Path] | None = None
    for step, entry in _checkpoint_folders(base):
        if 0 < step <= up_to and (best is None or step > best[0]) and checkpoint_complete(entry, step):
            best = (step, entry)
    return best


def _folder_facts(path: Path, marker: str) -> tuple[datetime, int] | None:
    try:
        stamp = (path / marker).stat().st_mtime
        size = 0
        for root, _dirs, files in os.walk(path):
            for name in files:
                try:
                    size += (Path(root) / name).stat().st_size
                except OSError:  # removed while we looked
                    continue
    except OSError:
        return None
    return datetime.fromtimestamp(stamp, tz=UTC), size


def model_config_file(folder: Path) -> str | None:
    """What a saved model folder holds: "config.json" for full weights, ADAPTER_CONFIG for a
    LoRA adapter alone (a run with `peft`), None when it holds neither (not saved, or half)."""
    for name in ("config.json", ADAPTER_CONFIG):
        if (folder / name).is_file():
            return name
    return None


def run_checkpoints(*, run: Run) -> list[Checkpoint]:
    """The run's usable checkpoints, by step (the warm-up's model first, as step 0)."""
    base = run_dir(run.pk)
    found: list[Checkpoint] = []
    warmup = base / WARMUP_MODEL_DIR
    saved = model_config_file(warmup)
    facts = _folder_facts(warmup, saved) if saved else None
    if facts is not None:
        found.append(Checkpoint(0, "warmup", facts[0], facts[1], warmup, adapter=saved == ADAPTER_CONFIG))
    recorded = run.checkpoint_step
    for step, entry in _checkpoint_folders(base) if recorded else []:
        if recorded is None or step > recorded or step == 0:
            continue
        if not checkpoint_complete(entry, step):
            continue
        marker = CHECKPOINT_MARKER if (entry / CHECKPOINT_MARKER).is_file() else "trainer_state.json"
        facts = _folder_facts(entry, marker)
        if facts is None:
            continue
        saved = model_config_file(entry)
        if saved:
            found.append(Checkpoint(step, "grpo", facts[0], facts[1], entry, adapter=saved == ADAPTER_CONFIG))
    return sorted(found, key=lambda checkpoint: checkpoint.step)


def run_checkpoint(*, run: Run, checkpoint: int | Literal["last"]) -> Checkpoint:
    """One checkpoint of `run` ("last": the newest). Raises ModelRefError."""
    listed = run_checkpoints(run=run)
    if not listed:
        raise ModelRefError(f"run {run.pk} has no checkpoint yet")
    if checkpoint == "last":
        return listed[-1]
    for item in listed:
        if item.step == checkpoint:
            return item
    steps = ", ".join(str(item.step) for item in listed)
    raise ModelRefError(f"run {run.pk} has no checkpoint at step {checkpoint}; it has {steps}")


def model_label(model: str | CheckpointRef) -> str:
    """How a `model` is shown and stored in Run.model: the string itself, or `run:<id>@<step|last>`."""
    if isinstance(model, CheckpointRef):
        return f"run:{model.run}@{model.checkpoint}"
    return model


def model_resolve(*, model: str | CheckpointRef, user: Any) -> ResolvedModel:
    """The folder or hub id behind `model`, for `user`. Only checkpoint references are
    resolved against the database and the disk here; the rules for strings (folder roots,
    demo builds, the hub cache) are `services._model_error`'s. Raises ModelRefError."""
    if isinstance(model, CheckpointRef):

        run = runs_visible_to(user=user).filter(pk=model.run).first()
        if run is None:
            # The same message for a run that exists but is not theirs.
            raise ModelRefError(f"no run with id {model.run}")
        found = run_checkpoint(run=run, checkpoint=model.checkpoint)
        label = f"run {run.pk} ({run.name}) at step {found.step}" + (
            " (warm-up)" if found.phase == "warmup" else ""
        )
        return ResolvedModel(str(found.path), label, True, run.pk, found.step, found.adapter)
    if model.startswith("demo:"):
        return ResolvedModel(
            str(Path(settings.MODELS_DIR) / model.removeprefix("demo:")), model, True
        )
    if model.startswith("/"):
        return ResolvedModel(model, model, True)
    return ResolvedModel(model, model, False)


def model_pinned(*, model: str | CheckpointRef, user: Any) -> str | CheckpointRef:
    """`model` with "last" replaced by the step it names now, so that a run (and its resume)
    or an evaluation trains from exactly the weights it was launched with."""
    if isinstance(model, CheckpointRef) and model.checkpoint == "last":
        resolved = model_resolve(model=model, user=user)
        return CheckpointRef(run=model.run, checkpoint=resolved.checkpoint or 0)
    return model
