"""Celery worker side of envlab: tasks, the training runner, adapters, telemetry."""
