"""The web app's Celery client. It sends tasks by name (`TRAIN_TASK`, `EVALUATE_TASK`,
`JOB_TASK`) to the queues the workers read, with the broker settings the workers use
(`CELERY_*` in settings); the tasks themselves are the worker's (worker/tasks.py, app
worker/celery_app.py) and are never imported here, so the web app loads no worker code."""

from __future__ import annotations

from celery import Celery

# Not the current app: in a worker process, worker/celery_app.py's app stays the one its
# tasks and signals belong to.
app = Celery("envlab", set_as_current=False)
app.config_from_object("django.conf:settings", namespace="CELERY")
