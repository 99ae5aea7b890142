"""Several training processes for one run: data parallel through accelerate.

The Celery task that claimed the run (worker/training/runner.py `train`) prepares it (the lease, the
rewind, the warm-up, which plays on one device), then starts `config.ranks` processes of
`worker.training.rank` through the lab's launcher (worker/training/launch.py) and watches them.
Each process joins the run's process group through a FileStore in a private folder (no TCP
rendezvous: security review N8), and TRL's Accelerator then uses that group. On device 'cuda' they
get the first N GPUs and talk over NCCL, and a managed vLLM server takes the GPU after them. On
'cpu' they talk over gloo, on the loopback interface; this is how the end-to-end tests run two
real processes on a machine without a GPU.

Only the first process (rank 0) records anything: telemetry, the lease's heartbeat, alerts,
checkpoints and the run's end. The others hand it their episodes' facts, tool counts and
throughput through the process group (`RankGroup`), and at every step end every process
applies rank 0's decision to stop, so a cancel, an alert or a lost lease stops them all at the
same step: one process leaving early would leave the others waiting in a collective.

The task renews the lease while the processes start (loading a model can take longer than
the stale limit), and records the run failed when they exit without recording its end (a
process crashed or was killed, and the launcher stopped the others). Each process watches the
task's process and stops when it is gone, so a lost worker leaves no training behind it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

from webapp.settings.env import env_int

log = logging.getLogger(__name__)

T = TypeVar("T")

LOG_NAME = "processes.log"  # in the run's folder: the launcher's and every process's output
STOP_GRACE_SECONDS = 30.0  # from SIGTERM to SIGKILL when the task stops the processes
TAIL_CHARS = 3000  # of the log, in the error of a run whose processes died


class RankGroup:
    """This process's place among the run's training processes, and the two collectives the
    lab adds to TRL's: every process must call them at the same points, in the same order."""

    def __init__(self, *, rank: int, world: int) -> None:
        self.rank = rank
        self.world = world

    @classmethod
    def from_env(cls) -> RankGroup:
        """From the variables the launcher sets (RANK, WORLD_SIZE)."""
        return cls(rank=env_int("RANK", 0), world=env_int("WORLD_SIZE", 1))

    @property
    def lead(self) -> bool:
        return self.rank == 0

    def agree(self, value: T) -> T:
        """Rank 0's `value`, on every process."""
        if self.world <= 1:
            return value
        from accelerate.utils import broadcast_object_list

        box = [value]
        broadcast_object_list(box, from_process=0)
        return box[0]

    def gather(self, items: list[Any]) -> list[Any]:
        """Every process's `items`, concatenated in rank order, on every process (the order TRL
        gathers its prompts and completions in)."""
        if self.world <= 1:
            return list(items)
        from accelerate.utils import gather_object

        return list(gather_object(list(items)))


# What a collective raises on the processes still alive when one of them died: torch's own
# distributed errors, or gloo's and NCCL's transport errors, which reach Python as RuntimeError.
_PEER_LOST_MARKS = ("gloo/transport", "NCCL", "Connection reset by peer", "Connection closed by peer", "Broken pipe")


def peer_lost(exc: BaseException) -> bool:
    """Whether `exc`, raised in a training process, says another process of the run is gone."""
    from torch.distributed import DistError

    if isinstance(exc, DistError):
        return True
    return isinstance(exc, RuntimeError) and any(mark in str(exc) for mark in _PEER_LOST_MARKS)


def join_group() -> None:
    """In a training process started by the launcher: join the run's process group through the
    launcher's private FileStore, before TRL's Accelerator looks for one (it uses a group that
    exists). A process started alone (WORLD_SIZE 1, or no launcher) joins nothing."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from worker.training.launch import RENDEZVOUS_VARIABLE

    world = env_int("WORLD_SIZE", 1)
    store = os.environ.get(RENDEZVOUS_VARIABLE, "")
    if world <= 1 or not store or dist.is_initialized():
        return
    rank = env_int("RANK", 0)
    backend = "gloo"
    if os.environ.get("CUDA_VISIBLE_DEVICES") and torch.cuda.is_available():
        torch.cuda.set_device(env_int("LOCAL_RANK", rank))
        backend = "nccl"
    dist.init_process_group(
        backend, init_method=f"file://{store}", rank=rank, world_size=world,
        timeout=timedelta(seconds=env_int("ENVLAB_RENDEZVOUS_SECONDS", 1800)),
    )


def rank_command(
    *, config: Any, run_id: int, lease_owner: str, start_step: int, resume_from: Path | None,
    model_source: str | None, vllm_url: str | None, supervisor_pid: int, python: str = sys.executable,
) -> list[str]:
    """The command line that starts the run's training processes (see the module docstring)."""
    return [
        python, "-m", "worker.training.launch", "--processes", str(config.ranks), "--device", config.device, "--",
        python, "-m", "worker.training.rank",
        "--run-id", str(run_id),
        "--lease-owner", lease_owner,
        "--start-step", str(start_step),
        "--resume-from", str(resume_from or ""),
        "--model-source", model_source or "",
        "--vllm-url", vllm_url or "",
        "--supervisor", str(supervisor_pid),
    ]


def run_ranks(
    *, run: Any, config: Any, lease_owner: str, output_dir: Path, start_step: int, resume_from: Path | None,
    model_source: str | None,
) -> str:
    """Start the run's training processes, keep its lease while they start, and record the end
    they could not record themselves. Returns how the run ended ("lease_lost" when another
    worker took it over)."""
    from webapp.runs.models import Run
    from worker.training.lifecycle import error_message, failure_class, finish_run, managed_vllm

    try:
        with managed_vllm(run, config, output_dir, model_source) as vllm_url:
            return _supervise(
                run=run, config=config, lease_owner=lease_owner, output_dir=output_dir, start_step=start_step,
                resume_from=resume_from, model_source=model_source, vllm_url=vllm_url,
            )
    except Exception as exc:
        log.exception("run %s: its training processes could not run", run.pk)
        finish_run(
            run_id=run.pk, lease_owner=lease_owner, status=Run.Status.FAILED, error=error_message(exc), step=None,
            failure=failure_class(exc),
        )
        return Run.Status.FAILED


def _supervise(
    *, run: Any, config: Any, lease_owner: str, output_dir: Path, start_step: int, resume_from: Path | None,
    model_source: str | None, vllm_url: str | None,
) -> str:
    from django.conf import settings
    from django.db import close_old_connections

    from webapp.runs.models import Run
    from webapp.runs.services import run_heartbeat
    from worker.training.lifecycle import finish_run

    command = rank_command(
        config=config, run_id=run.pk, lease_owner=lease_owner, start_step=start_step, resume_from=resume_from,
        model_source=model_source, vllm_url=vllm_url, supervisor_pid=os.getpid(),
    )
    base = str(settings.BASE_DIR)
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (base, os.environ.get("PYTHONPATH", "")) if p),
    }
    log_path = output_dir / LOG_NAME
    beat = float(settings.ENVLAB_HEARTBEAT_SECONDS)
    grace = float(settings.ENVLAB_CANCEL_GRACE_SECONDS)
    with open(log_path, "ab") as out:
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {config.ranks} training processes\n".encode())
        out.flush()
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=base, start_new_session=True
        )
    log.info("run %s: %s training processes started (launcher pid %s)", run.pk, config.ranks, process.pid)
    cancel_since: float | None = None
    ended_at: float | None = None
    try:
        while process.poll() is None:
            try:
                ours, cancel = run_heartbeat(run_id=run.pk, lease_owner=lease_owner)
            except Exception:  # the database may be briefly away: rank 0's sink copes with it
                close_old_connections()
                ours, cancel = True, False
            if not ours:
                held = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).values_list(
                    "lease_owner", flat=True
                ).first()
                if held is not None and held != lease_owner:
                    log.warning("run %s: the lease was taken over; stopping its training processes", run.pk)
                    _stop(process)
                    return "lease_lost"
                # Rank 0 recorded the end: the processes are on their way out.
                ended_at = ended_at or time.monotonic()
                if time.monotonic() - ended_at > 120.0:
                    _stop(process)
            elif cancel:
                cancel_since = cancel_since or time.monotonic()
                if time.monotonic() - cancel_since > grace:
                    # Stopped at a step end within the grace, or not at all: a step stuck in an
                    # environment call, or processes stuck starting.
                    log.warning("run %s: not stopped %.0f s after the cancel; stopping its processes", run.pk, grace)
                    _stop(process)
                    finish_run(
                        run_id=run.pk, lease_owner=lease_owner, status=Run.Status.CANCELLED,
                        error=f"cancelled: the training processes did not stop at a step end within {grace:.0f} s "
                        "and were stopped",
                        step=None,
                    )
                    return Run.Status.CANCELLED
            time.sleep(beat)
    except BaseException:  # the task itself is being stopped: take the processes with it
        _stop(process)
        raise
    code = process.returncode
    close_old_connections()
    current = Run.objects.filter(pk=run.pk).values_list("status", "lease_owner").first()
    if current is not None and current == (Run.Status.RUNNING, lease_owner):
        error = (
            f"the training processes exited (code {code}) before recording the run's end; "
            f"the end of {LOG_NAME}:\n{_tail(log_path)}"
        )
        # A process died (killed, out of memory, a lost peer): nothing says the run would fail again.
        finish_run(
            run_id=run.pk, lease_owner=lease_owner, status=Run.Status.FAILED, error=error, step=None,
            failure=Run.Failure.INFRASTRUCTURE,
        )
        return Run.Status.FAILED
    if current is not None and current[0] == Run.Status.RUNNING:
        return "lease_lost"
    return str(current[0]) if current is not None else Run.Status.FAILED


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the launcher's process group (the launcher passes it on to the processes it
    started), SIGKILL after the grace."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_SECONDS), (signal.SIGKILL, 10.0)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_CHARS))
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return "(no log)"


def supervisor_alive(pid: int) -> bool:
    """Whether the task's process is there: a killed one stays a zombie until its Celery parent
    reaps it, and a zombie is gone for this purpose (psutil comes with accelerate)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def watch_supervisor(pid: int, *, every: float = 1.0, grace: float = STOP_GRACE_SECONDS) -> None:
    """In a training process: SIGTERM this process once the task that started the processes is
    gone (its worker died), so none trains on without a run to record into; SIGKILL after
    `grace` seconds if the SIGTERM did not end it (the main thread stuck in a call that never
    returns to Python, or an `except BaseException` somewhere that swallowed the exit)."""
    import threading

    def watch() -> None:
        while supervisor_alive(pid):
            time.sleep(every)
        log.warning("the task that started this training process (pid %s) is gone; stopping", pid)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        log.error("still running %.0f s after the SIGTERM; killing this training process", grace)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="supervisor-watch", daemon=True).start()
