"""The worker as a Django app, registered only so that `manage.py` finds the worker's own
commands (worker/management/commands: building demo models, the learning table). Registering
it imports nothing but this module: no torch, no training code."""

from __future__ import annotations

from django.apps import AppConfig


class WorkerConfig(AppConfig):
    name = "worker"
    verbose_name = "envlab worker"
