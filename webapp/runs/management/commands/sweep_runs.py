"""Mark runs whose worker stopped sending heartbeats as interrupted."""

from typing import Any

from django.core.management.base import BaseCommand

from webapp.runs.services import run_mark_stale_interrupted


class Command(BaseCommand):
    help = "Mark runs with a stale heartbeat as interrupted (they can be resumed)."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"{run_mark_stale_interrupted()} run(s) marked interrupted")
