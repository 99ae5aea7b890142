"""envlab web application (Django project). Importing it must not import torch."""

# Load the Celery app with Django so that `task.delay()` from a view uses its broker.
from worker.celery_app import app as celery_app

__all__ = ["celery_app"]
