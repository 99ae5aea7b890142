"""How a run's training process starts and ends, shared by the Celery task's own training
(worker/training/runner.py) and the processes of a multi-process run (worker/training/distributed.py): the
model it trains from, the vLLM server it may ask for, recording its end, and the error it
stores. No torch here: the task's watcher imports it before any training does.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from envs.adapters import outage
from envs.adapters.base import ResetRefused
from webapp.accounts.secrets import user_secret_value
from webapp.runs.checkpoints import model_resolve
from webapp.runs.config import RunConfig
from webapp.runs.models import Run
from webapp.runs.services import model_folder_error, run_finish
from worker.model_loading import adapter_base

log = logging.getLogger(__name__)


def run_model_source(run: Run, config: RunConfig) -> tuple[str, str | None]:
    """The folder or hub id the run's `model` names now, and the hub token to read it with."""
    # A checkpoint is looked up again, as the owner: the source run may be gone since launch.
    resolved = model_resolve(model=config.model, user=run.owner)
    source = resolved.source
    if resolved.local and isinstance(config.model, str) and not config.model.startswith("demo:"):
        # Checked at launch too; again here, where the folder is read (a symlink may have moved).
        refused = model_folder_error(Path(source))
        if refused:
            raise ValueError(refused)
    # A hub model may be gated: the owner's own Hugging Face token, never another user's.
    hub_token = None if resolved.local else user_secret_value(user=run.owner, name="hf_token")
    return source, hub_token


@contextmanager
def managed_vllm(run: Run, config: RunConfig, output_dir: Path, model_source: str | None) -> Iterator[str | None]:
    """The vLLM server this run asked the worker to start (server mode, no URL given), on the
    GPU after the training ones (training keeps the first `gpus`), for as long as training runs."""
    if not config.generation.managed_server:
        yield None
        return
    from worker.training.vllm_server import ManagedVLLMServer

    # A LoRA adapter (a warm-up's, a checkpoint's) is served from its base model's full weights.
    source = adapter_base(model_source or run_model_source(run, config)[0])
    server = ManagedVLLMServer(
        model=source, generation=config.generation, gpu=config.gpus, log_path=output_dir / "vllm.log"
    )
    with server as url:
        yield url


def finish_run(**fields: Any) -> None:
    """run_finish, retried while the database is away (the outage that stopped the run may
    still last), for as long as telemetry waits for it (ENVLAB_TELEMETRY_OUTAGE_SECONDS, a
    minute at least), every second at first, then every 5 s. The lease is still ours: the
    sweep trusts no stale heartbeat until it has seen the database for ENVLAB_INTERRUPT_SECONDS
    (webapp.core.leases.sweep_watch), and this retries sooner. If the database stays away
    longer the heartbeat goes stale and the sweep marks the run interrupted (resumable)."""
    deadline = time.monotonic() + max(60.0, settings.ENVLAB_TELEMETRY_OUTAGE_SECONDS)
    pause = 1.0
    while True:
        try:
            run_finish(**fields)
            return
        except Exception:
            if time.monotonic() > deadline:
                log.exception("run %s: could not record its end (%s)", fields["run_id"], fields["status"])
                return
            log.warning("run %s: recording its end failed; retrying", fields["run_id"], exc_info=True)
            close_old_connections()
            time.sleep(pause)
            pause = min(5.0, pause * 2)


# The run-health alert an environment out of reach raises (cleared when it is back).
OUTAGE_ALERT = "environment_unreachable"

# Marks an exception with the class of failure it means for the run (Run.Failure), where the
# place it was raised knows better than its type: loading the model, building the environments.
FAILURE_MARK = "envlab_failure"


def mark_failure(exc: BaseException, failure: str) -> None:
    """Say what `exc` means for the run, unless something nearer the cause already did."""
    if not getattr(exc, FAILURE_MARK, ""):
        try:
            setattr(exc, FAILURE_MARK, failure)
        except AttributeError:  # an exception type with __slots__: classified by type alone
            pass


def failure_class(exc: BaseException) -> str:
    """The class of failure (Run.Failure) an exception that ended training means: whether a
    resume could succeed. Infrastructure (resumable): out of memory, a server, database or
    network out of reach, a lost training process. Config: a refusal of the run's settings (a
    server at capacity, a refused reset). Model: the model could not be loaded. Anything else
    is unclassified (not resumable: nothing says it would not fail again)."""
    from django.db import InterfaceError, OperationalError

    from worker.capacity import capacity_refusal  # the failure path only; see _learn_capacity

    if capacity_refusal(exc) is not None or isinstance(exc, ResetRefused):
        return Run.Failure.CONFIG
    for link in _causes(exc):
        if isinstance(link, MemoryError) or type(link).__name__ in ("OutOfMemoryError", "DistError"):
            return Run.Failure.INFRASTRUCTURE
        if isinstance(link, OperationalError | InterfaceError) or outage.unreachable(link):
            return Run.Failure.INFRASTRUCTURE
    marked = getattr(exc, FAILURE_MARK, "")
    return marked if marked in Run.Failure.values else Run.Failure.ERROR


def _causes(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def outage_wait_stopped(exc: BaseException) -> bool:
    """Whether training ended because a wait for an environment was given up for the run's stop."""
    return isinstance(outage.outage_of(exc), outage.OutageWaitStopped)


def outage_end(exc: BaseException, *, checkpoint_step: int | None) -> str | None:
    """The interrupted run's reason when `exc` is an environment outage that outlasted
    ENVLAB_ENV_OUTAGE_SECONDS (never a failure: the run resumes once the server is back); None otherwise."""
    found = outage.outage_of(exc)
    if found is None or isinstance(found, outage.OutageWaitStopped):
        return None
    return (
        f"interrupted: {found}. Resume continues from checkpoint step {checkpoint_step or 0} "
        "once the environment server answers again."
    )


@contextmanager
def outage_alerts(sink: Any) -> Iterator[None]:
    """While training runs: calls to an environment out of reach wait for it (envs/adapters/outage.py),
    it raises the `environment_unreachable` alert (with its name) through `sink`, and its return clears it. The process's outage clock
    starts afresh: an earlier run's outage in this worker process is not this run's."""
    outage.CLOCK.clear()

    def tell(env: str, reachable: bool, message: str) -> None:
        sink.alert({"kind": OUTAGE_ALERT, "step": sink.step + 1, "message": message, "active": not reachable})

    unsubscribe = outage.CLOCK.subscribe(tell)
    try:
        # A cancel or a lost lease ends the wait: the run's stop must not wait five minutes.
        with outage.CLOCK.waiting(stop=lambda: sink.cancel_requested.is_set() or sink.lease_lost.is_set()):
            yield
    finally:
        unsubscribe()
        outage.CLOCK.clear()


def error_message(exc: BaseException) -> str:
    """The run's stored error. A refusal is envlab's own message, written for the user, and
    shown as it is; anything else keeps its exception type, which is often half the story."""
    from worker.capacity import capacity_refusal  # the failure path only; see _learn_capacity

    refusal = capacity_refusal(exc)
    if refusal is not None:
        return str(refusal)[:4000]
    if isinstance(exc, ResetRefused):  # the server's own words, with the options it refused
        return str(exc)[:4000]
    tail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return tail[:4000]


def learn_capacity(exc: BaseException, *, config: RunConfig, run_id: int, step: int | None, phase: str) -> None:
    """A run that failed on a session refusal stores the limit the server stated on its row,
    so the next launch with a larger batch is refused at launch (worker/capacity.py)."""
    from worker.capacity import run_learn_capacity  # kept out of this module's shared import block

    run_learn_capacity(exc=exc, config=config, run_id=run_id, step=step, phase=phase)
