"""envlab web application (Django project). Importing it must not import torch, nor any
worker code: tasks are sent by name through its own Celery client (webapp/celery.py)."""

from webapp.celery import app as celery_app

__all__ = ["celery_app"]
