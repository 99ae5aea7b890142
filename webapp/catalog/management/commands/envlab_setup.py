"""Prepare a local installation: a demo login, the bundled servers started and registered."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from webapp.accounts.secrets import user_secrets_reencrypt
from webapp.accounts.services import demo_password_file, demo_user_ensure
from webapp.catalog.bundled import (
    BUNDLED,
    BundledError,
    bundled_register,
    bundled_start,
    bundled_stop,
    port_is_free,
    process_is_ours,
)
from webapp.catalog.models import BundledServer, Environment
from webapp.catalog.services import EnvironmentRejected, environment_probe, environment_register


class Command(BaseCommand):
    help = (
        "Create the demo login, start every bundled environment server (echo, wordle, catch, "
        "sudoku, mcpdemo, ors) as a local process, or adopt it when it already runs healthy on "
        "its recorded port, and register each in the catalog. One line per server says its URL "
        "and capacity, or what failed and where its log is; a failure does not stop the others. "
        "--stop-bundled stops them all (what `make run` does on exit); --status lists them."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument(
            "--password", default=None,
            help="password for a new demo login (default: a random one, kept in var/demo-login)",
        )
        parser.add_argument(
            "--echo-url", default="",
            help="register echo at this URL (a server you run yourself) instead of starting it",
        )
        parser.add_argument(
            "--capacity", type=int, default=None,
            help="sessions per server (MAX_CONCURRENT_ENVS); default: the recorded or built-in one",
        )
        parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for each server")
        parser.add_argument(
            "--only", action="append", choices=list(BUNDLED), metavar="KEY",
            help=f"start only these servers (repeatable): {', '.join(BUNDLED)}",
        )
        parser.add_argument("--stop-bundled", action="store_true", help="stop every bundled server and exit")
        parser.add_argument("--status", action="store_true", help="list the bundled servers and exit")
        parser.add_argument("--strict", action="store_true", help="exit with an error if any server failed")

    def handle(self, *args: Any, username: str, password: str | None, echo_url: str, capacity: int | None,
               wait: float, only: list[str] | None, stop_bundled: bool, status: bool, strict: bool,
               **options: Any) -> None:
        if capacity is not None and not (1 <= capacity <= 100_000):
            raise CommandError("--capacity must be between 1 and 100000")
        if stop_bundled:
            for key in only or BUNDLED:
                server = bundled_stop(key=key)
                self.stdout.write(f"{key}: {server.status}")
            return
        if status:
            self._print_status()
            return
        user, shown = demo_user_ensure(username=username, password=password)
        if shown is not None:
            self.stdout.write(f"login: {username} / {shown}  (kept in {demo_password_file()})")
        else:
            self.stdout.write(f"login: {username}, with the password you set")
        moved = user_secrets_reencrypt()
        if moved:
            self.stdout.write(f"stored keys: {moved} re-encrypted under this installation's key")
        keys = [key for key in (only or BUNDLED) if not (key == "echo" and echo_url)]
        started = self._start_all(keys=keys, capacity=capacity, wait=wait)
        failed: list[str] = []
        for key in only or BUNDLED:
            if key == "echo" and echo_url:
                ok = self._register_echo_url(user=user, echo_url=echo_url, capacity=capacity or 64, wait=wait)
            else:
                ok = self._report_and_register(key=key, outcome=started[key], user=user)
            if not ok:
                failed.append(key)
        if failed and strict:
            raise CommandError(f"failed: {', '.join(failed)}")

    def _start_all(self, *, keys: list[str], capacity: int | None,
                   wait: float) -> dict[str, BundledServer | BundledError]:
        """Start the servers side by side: each spends seconds importing before it answers."""

        def start(key: str) -> BundledServer | BundledError:
            spec = BUNDLED[key]
            port = None
            if not BundledServer.objects.filter(key=key).exists() and port_is_free(spec.default_port):
                port = spec.default_port  # a stable, documented address on first start
            try:
                return bundled_start(key=key, port=port, capacity=capacity, wait=wait)
            except BundledError as exc:
                return exc
            finally:
                connections.close_all()  # this thread's own database connection

        if not keys:
            return {}
        with ThreadPoolExecutor(max_workers=len(keys), thread_name_prefix="bundled-start") as pool:
            return dict(zip(keys, pool.map(start, keys), strict=True))

    def _report_and_register(self, *, key: str, outcome: BundledServer | BundledError,
                             user: User) -> bool:
        if isinstance(outcome, BundledError):
            self.stderr.write(f"{key}: FAILED: {outcome}")
            return False
        server = outcome
        if server.status != BundledServer.Status.RUNNING:
            first_line = (server.last_error or "no error recorded").splitlines()[0]
            self.stderr.write(f"{key}: FAILED to start: {first_line} (log: {server.log_path})")
            return False
        try:
            environments = bundled_register(key=key, owner=user)
        except (BundledError, EnvironmentRejected) as exc:
            self.stderr.write(f"{key}: {server.url} capacity {server.capacity}, but registration "
                              f"FAILED: {exc} (log: {server.log_path})")
            return False
        entries = ", ".join(f"'{e.name}' {e.status}" for e in environments)
        self.stdout.write(f"{key}: {server.url} capacity {server.capacity} (pid {server.pid}); catalog: {entries}")
        return all(e.status == Environment.Status.HEALTHY for e in environments)

    def _register_echo_url(self, *, user: User, echo_url: str, capacity: int,
                           wait: float) -> bool:
        """The override: echo is a server run elsewhere; register it at its URL (waiting for it)."""
        # The demo user's own echo entry: names are unique per owner, and another user's `echo`
        # (one from before the bundled names were reserved) is theirs, not the demo's.
        existing = Environment.objects.filter(name="echo", owner=user).order_by("pk").first()
        deadline = time.monotonic() + wait
        if existing is not None:
            if existing.base_url != echo_url.rstrip("/") or not existing.shared:
                existing.base_url = echo_url.rstrip("/")
                existing.shared = True  # the demo environment serves every user
                existing.save(update_fields=["base_url", "shared"])
            while environment_probe(environment=existing).status != "healthy" and time.monotonic() < deadline:
                time.sleep(0.5)
            line = f"echo: {existing.base_url} (given by --echo-url) {existing.status}"
            if existing.status != Environment.Status.HEALTHY:
                self.stderr.write(f"{line}: {existing.last_error}")
                return False
            self.stdout.write(line)
            return True
        while True:
            try:
                environment = environment_register(
                    owner=user, name="echo", base_url=echo_url, capacity=capacity, shared=True,
                    allow_reserved_name=True,  # the operator's own demo entry
                )
                break
            except EnvironmentRejected as exc:
                if time.monotonic() > deadline:
                    self.stderr.write(f"echo: FAILED to register {echo_url}: {exc}")
                    return False
                time.sleep(0.5)
        self.stdout.write(f"echo: {environment.base_url} (given by --echo-url) capacity {environment.capacity}; "
                          f"registered (id {environment.pk})")
        return True

    def _print_status(self) -> None:
        rows = {row.key: row for row in BundledServer.objects.all()}
        for key, spec in BUNDLED.items():
            server = rows.get(key)
            if server is None:
                self.stdout.write(f"{key}: not started")
                continue
            alive = "alive" if process_is_ours(server.pid, spec) else "no process"
            self.stdout.write(
                f"{key}: {server.status} (wants {server.desired}, {alive}) {server.url or '-'} "
                f"capacity {server.capacity} restarts {server.restarts} log {server.log_path or '-'}"
            )
