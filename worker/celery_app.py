"""The Celery application. Importing it imports no torch: training code loads inside tasks
(a parent process that ran parallel torch work before forking hangs its children)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.local")


def _lab_trackio_dir() -> None:
    """TRL imports trackio along with itself, and trackio reads TRACKIO_DIR once, at import: the
    lab's folder (runs with report_to trackio, worker/training/trackers.py) must be in this
    process's environment before any task imports TRL. An operator's own TRACKIO_DIR wins."""
    from django.conf import settings

    os.environ.setdefault("TRACKIO_DIR", str(settings.ENVLAB_TRACKIO_DIR))


_lab_trackio_dir()

app = Celery("envlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["worker"], related_name="tasks", force=True)


def capabilities() -> dict[str, object]:
    """What this worker can run, found without importing torch (see the module docstring).

    ENVLAB_FAKE_CAPABILITIES (a JSON object) overrides what was found, for tests of routing on
    machines without a GPU; the heartbeat then says `"fake": true`, and the pages show it.
    """
    import glob
    import importlib.util
    import json

    cuda_devices = len([p for p in glob.glob("/dev/nvidia[0-9]*") if p[-1].isdigit()])
    found: dict[str, object] = {
        "cuda_devices": cuda_devices,
        "gpus": _gpus() if cuda_devices else [],
        "vllm": importlib.util.find_spec("vllm") is not None,
        "vllm_version": _version("vllm"),
        "cpu_count": os.cpu_count(),
    }
    fake = os.environ.get("ENVLAB_FAKE_CAPABILITIES", "").strip()
    if fake:
        overrides = json.loads(fake)
        if not isinstance(overrides, dict):
            raise ValueError("ENVLAB_FAKE_CAPABILITIES must be a JSON object")
        found.update(overrides, fake=True)
    return found


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _gpus() -> list[dict[str, object]]:
    """Each GPU's name and memory (MiB), from nvidia-smi; empty where it cannot be asked."""
    import subprocess

    query = "--query-gpu=name,memory.total,memory.used"
    try:
        out = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus: list[dict[str, object]] = []
    for line in out.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            gpus.append({"name": parts[0][:100], "memory_mib": int(parts[1]), "memory_used_mib": int(parts[2])})
    return gpus


def training_queues() -> list[str]:
    """The training queues this machine can carry (webapp/runs/routing.py)."""
    from webapp.runs.routing import queues_for

    return queues_for(capabilities())


# Set in the parent at start-up (worker_init), inherited by every pool child it forks.
WORKER_NAME = ""
WORKER_QUEUES: list[str] = []
# The run the child is training, read by its heartbeat thread.
CURRENT_RUN: dict[str, int | None] = {"id": None}


def _beat_forever(name: str) -> None:
    import time

    from django.db import close_old_connections
    from django.utils import timezone

    from webapp.runs.models import WorkerHeartbeat

    caps = {**capabilities(), "consumes": WORKER_QUEUES}
    while True:
        try:
            if caps.get("gpus") and not caps.get("fake"):
                caps = {**caps, "gpus": _gpus() or caps["gpus"]}  # memory in use changes
            close_old_connections()
            WorkerHeartbeat.objects.update_or_create(
                name=name,
                defaults={"capabilities": caps, "heartbeat_at": timezone.now(),
                          "current_run_id": CURRENT_RUN["id"]},
            )
        except Exception:  # the database may be briefly away; try again next beat
            pass
        time.sleep(5.0)


def _remember_name(sender: object = None, **kwargs: object) -> None:
    global WORKER_NAME, WORKER_QUEUES
    WORKER_NAME = str(getattr(sender, "hostname", "") or "")
    try:  # what -Q selected: the heartbeat says which queues this worker really reads
        WORKER_QUEUES = sorted(app.amqp.queues.consume_from)
    except Exception:
        WORKER_QUEUES = []


def _start_heartbeat_in_child(**kwargs: object) -> None:
    """In the pool child, never in the parent: a thread alive in the parent while it forks
    a replacement child can leave a lock held forever in that child."""
    import socket
    import threading

    name = WORKER_NAME or f"celery@{socket.gethostname()}"
    threading.Thread(target=_beat_forever, args=(name,), daemon=True, name="worker-heartbeat").start()


from celery.signals import worker_init, worker_process_init  # noqa: E402

worker_init.connect(_remember_name, weak=False)
worker_process_init.connect(_start_heartbeat_in_child, weak=False)
