"""Checkpoints whole or absent (worker/training/checkpoint_save.py), saved by a real transformers Trainer
on a tiny model, with the run's real telemetry sink and the real database: a full disk fails
the save with a run event, keeps the previous checkpoint and training goes on; the next save
works again once there is room."""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM, Trainer, TrainerCallback, TrainingArguments

from tests.factories import RunFactory
from tests.support.checkpoints import checkpoint_folder
from webapp.runs.checkpoints import CHECKPOINT_MARKER, checkpoint_leftovers, run_checkpoints
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import run_claim
from worker.training.checkpoint_save import AtomicCheckpoints, disk_failure, remove_leftovers
from worker.training.runner import TelemetryCallback
from worker.training.telemetry import TelemetrySink

pytestmark = pytest.mark.django_db(transaction=True)


class _Trainer(AtomicCheckpoints, Trainer):
    # Only where no tmpfs can be mounted (see small_disk): the checkpoint writer then raises
    # ENOSPC itself, as a full disk would make it.
    refuse_writes = False

    def save_model(self, *args, **kwargs):
        if self.refuse_writes:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().save_model(*args, **kwargs)


class _Disk:
    """The run folder on a small disk of its own, which `fill` fills and `free` empties."""

    def __init__(self, path: Path, mounted: bool) -> None:
        self.path, self.mounted, self.trainer = path, mounted, None

    def fill(self) -> None:
        if not self.mounted:
            self.trainer.refuse_writes = True
            return
        with open(self.path / "filler", "wb") as out:
            try:
                while True:
                    out.write(b"\0" * 65536)
                    out.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC

    def free(self) -> None:
        if self.trainer is not None:
            self.trainer.refuse_writes = False
        (self.path / "filler").unlink(missing_ok=True)


@pytest.fixture
def claimed_run(owner):
    run = RunFactory(owner=owner, name="disk", max_steps=6)
    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="w")
    return run


@pytest.fixture
def small_disk(settings, claimed_run):
    path = Path(settings.RUNS_DIR) / str(claimed_run.pk)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(path)], capture_output=True
    ).returncode == 0
    yield _Disk(path, mounted)
    if mounted:
        subprocess.run(["umount", str(path)], check=True)
    shutil.rmtree(path, ignore_errors=True)


class _DiskTrouble(TrainerCallback):
    """The disk fills just before step 4's save and has room again before step 6's."""

    def __init__(self, disk: _Disk) -> None:
        self.disk = disk

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 4:
            self.disk.fill()
        elif state.global_step == 5:
            self.disk.free()


def _tiny_trainer(output_dir: Path, callbacks) -> _Trainer:
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=8, max_position_embeddings=32,
    ))
    rows = [{"input_ids": torch.arange(i, i + 8) % 64, "labels": torch.arange(i, i + 8) % 64} for i in range(12)]
    args = TrainingArguments(
        output_dir=str(output_dir), max_steps=6, save_strategy="steps", save_steps=2, per_device_train_batch_size=1,
        logging_steps=1, report_to="none", disable_tqdm=True, use_cpu=True, dataloader_num_workers=0,
    )
    return _Trainer(model=model, args=args, train_dataset=rows, callbacks=callbacks)


def test_a_full_disk_fails_one_save_with_an_event_keeps_the_last_checkpoint_and_training_goes_on(
    claimed_run, small_disk
):
    # The chaos table's row is the same fault under a real worker: tests/e2e/test_full_disk.py.
    torch.set_num_threads(1)
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2, publish=False)
    trainer = _tiny_trainer(small_disk.path, [TelemetryCallback(sink), _DiskTrouble(small_disk)])
    trainer.envlab_sink = sink
    small_disk.trainer = trainer
    trainer.train()
    assert sink.close(timeout=20) is True

    assert trainer.state.global_step == 6  # the refused save did not stop training
    names = sorted(p.name for p in small_disk.path.iterdir())
    assert names == ["checkpoint-2", "checkpoint-6"]  # nothing of step 4, no staging folder
    for step in (2, 6):
        marker = json.loads((small_disk.path / f"checkpoint-{step}" / CHECKPOINT_MARKER).read_text())
        assert marker["step"] == step and "model.safetensors" in marker["files"]
    run = Run.objects.get(pk=claimed_run.pk)
    assert run.checkpoint_step == 6
    assert [c.step for c in run_checkpoints(run=run)] == [2, 6]
    [failed] = RunEvent.objects.filter(run=run, kind="checkpoint_failed")
    assert failed.data["step"] == 4 and failed.data["kept_step"] == 2
    assert failed.data["disk_full"] is True
    assert failed.message.startswith("The checkpoint at step 4 could not be saved: the disk is full")
    assert "step 2's checkpoint stays the newest" in failed.message
    assert "Training goes on and the next save tries again." in failed.message


def test_a_checkpoint_written_by_the_trainer_is_whole_before_it_has_its_name(claimed_run, small_disk):
    """Seen from the run folder during the save: the Trainer's files land in the staging folder,
    and `checkpoint-2` appears at once with its marker (the rename is the last thing done)."""
    seen: list[tuple[list[str], bool]] = []

    class Watch(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            seen.append((sorted(p.name for p in small_disk.path.iterdir()),
                         (small_disk.path / "checkpoint-2" / CHECKPOINT_MARKER).is_file()))

    trainer = _tiny_trainer(small_disk.path, [Watch()])
    real = trainer._save_optimizer_and_scheduler
    during: list[list[str]] = []

    def spy(output_dir):
        during.append(sorted(p.name for p in small_disk.path.iterdir()))
        during.append([str(Path(output_dir).relative_to(small_disk.path))])
        return real(output_dir)

    trainer._save_optimizer_and_scheduler = spy
    trainer.args.max_steps = 2
    trainer.train()
    assert during == [[".saving-checkpoint-2"], [".saving-checkpoint-2/checkpoint-2"]]
    assert seen == [(["checkpoint-2"], True)]


def test_what_a_kill_during_a_save_leaves_is_found_and_removed(settings, claimed_run, small_disk):
    base = small_disk.path
    (base / ".saving-checkpoint-8" / "checkpoint-8").mkdir(parents=True)
    (base / ".saving-checkpoint-8" / "checkpoint-8" / "model.safetensors").write_bytes(b"x" * 10)
    # A folder of the older layout whose trainer state was cut short, and a whole one.
    checkpoint_folder(base / "checkpoint-4", {"trainer_state.json": '{"global_step": 4, "log_hist'})
    checkpoint_folder(base / "checkpoint-2", {CHECKPOINT_MARKER: '{"step": 2}'})

    assert [(step, path.name) for step, path in checkpoint_leftovers(base)] == [
        (8, ".saving-checkpoint-8"), (4, "checkpoint-4"),
    ]
    assert remove_leftovers(base) == [
        {"step": 8, "folder": ".saving-checkpoint-8"}, {"step": 4, "folder": "checkpoint-4"},
    ]
    assert sorted(p.name for p in base.iterdir()) == ["checkpoint-2"]
    assert checkpoint_leftovers(base) == []


def test_disk_failures_are_told_apart_from_bugs():
    assert disk_failure(OSError(errno.ENOSPC, "No space left on device"))
    assert disk_failure(RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"))
    try:  # what torch.save raises on a full disk
        try:
            raise RuntimeError("basic_ios::clear: iostream error")
        except RuntimeError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")  # noqa: B904
    except RuntimeError as exc:
        assert disk_failure(exc)
    assert not disk_failure(TypeError("unexpected keyword argument 'x'"))
