"""The Celery application. Importing it imports no torch: training code loads inside tasks
(a parent process that ran parallel torch work before forking hangs its children)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.local")

app = Celery("envlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["worker"], related_name="tasks", force=True)


def capabilities() -> dict[str, object]:
    """What this worker can run, found without importing torch (see the module docstring)."""
    import glob
    import importlib.util

    cuda_devices = len([p for p in glob.glob("/dev/nvidia[0-9]*") if p[-1].isdigit()])
    return {
        "cuda_devices": cuda_devices,
        "vllm": importlib.util.find_spec("vllm") is not None,
        "cpu_count": os.cpu_count(),
    }


# Set in the parent at start-up (worker_init), inherited by every pool child it forks.
WORKER_NAME = ""
# The run the child is training, read by its heartbeat thread.
CURRENT_RUN: dict[str, int | None] = {"id": None}


def _beat_forever(name: str) -> None:
    import time

    from django.db import close_old_connections
    from django.utils import timezone

    from webapp.runs.models import WorkerHeartbeat

    caps = capabilities()
    while True:
        try:
            close_old_connections()
            WorkerHeartbeat.objects.update_or_create(
                name=name,
                defaults={"capabilities": caps, "heartbeat_at": timezone.now(),
                          "current_run_id": CURRENT_RUN["id"]},
            )
        except Exception:  # noqa: S110 - the database may be briefly away; try again next beat
            pass
        time.sleep(5.0)


def _remember_name(sender: object = None, **kwargs: object) -> None:
    global WORKER_NAME
    WORKER_NAME = str(getattr(sender, "hostname", "") or "")


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
