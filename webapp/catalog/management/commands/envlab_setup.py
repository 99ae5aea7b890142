"""Prepare a local installation: a demo login and the bundled environments registered."""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.catalog.models import Environment
from webapp.catalog.services import EnvironmentRejected, environment_probe, environment_register


class Command(BaseCommand):
    help = "Create the demo login and register the bundled echo environment."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo")
        parser.add_argument("--echo-url", default="http://127.0.0.1:8101")
        parser.add_argument("--capacity", type=int, default=64)
        parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the server")

    def handle(self, *args: Any, username: str, password: str, echo_url: str, capacity: int,
               wait: float, **options: Any) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(password)
            user.save()
        existing = Environment.objects.filter(name="echo").first()
        if existing is not None:
            if existing.base_url != echo_url.rstrip("/"):
                existing.base_url = echo_url.rstrip("/")
                existing.save(update_fields=["base_url"])
            deadline = time.monotonic() + wait
            while environment_probe(environment=existing).status != "healthy" and time.monotonic() < deadline:
                time.sleep(0.5)
            self.stdout.write(f"echo environment: {existing.status} at {existing.base_url}")
            return
        deadline = time.monotonic() + wait
        while True:
            try:
                environment = environment_register(
                    owner=user, name="echo", base_url=echo_url, capacity=capacity
                )
                break
            except EnvironmentRejected as exc:
                if time.monotonic() > deadline:
                    raise CommandError(f"could not register the echo environment: {exc}") from None
                time.sleep(0.5)
        self.stdout.write(f"echo environment registered (id {environment.pk}) at {environment.base_url}")
