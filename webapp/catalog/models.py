"""Registered environments: where they are, how healthy they are, what they offer."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Environment(models.Model):
    class Kind(models.TextChoices):
        OPENENV = "openenv", "OpenEnv"
        ORS = "ors", "Open Reward Standard"
        HARBOR = "harbor", "Harbor"

    class Status(models.TextChoices):
        UNKNOWN = "unknown", "Unknown"
        HEALTHY = "healthy", "Healthy"
        UNHEALTHY = "unhealthy", "Unhealthy"

    # Unique per owner only (Meta.constraints); the bundled servers' names are reserved
    # (webapp.catalog.names). Everything reaches an entry by its id.
    name = models.CharField(max_length=100, db_index=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.OPENENV)
    base_url = models.URLField(max_length=500)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="environments",
    )
    # Shared entries are visible to every user (bundled servers are); others only to their
    # owner and to users with catalog.view_environment. Changing one needs ownership or
    # catalog.change_environment either way (webapp.catalog.selectors).
    shared = models.BooleanField(default=False)
    # The Docker container an `image` registration started, so it can be stopped later.
    container_id = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.UNKNOWN)
    # Tool schemas as the catalog shows them: [{name, description, parameters}].
    tools = models.JSONField(default=list, blank=True)
    # Concurrent sessions the server accepts (servers do not report it: declared or probed).
    capacity = models.PositiveIntegerField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    last_error = models.TextField(blank=True, default="")
    checked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "pk"]
        permissions = [("run_container", "Can register container images (runs them on the host's Docker)")]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="catalog_environment_name_per_owner"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class BundledServer(models.Model):
    """One environment server this installation runs as a local process (webapp.catalog.bundled).

    `desired` is what the user asked for; `status` is what was last seen. The supervisor
    restarts a server whose desired state is running and whose process is gone.
    """

    class Desired(models.TextChoices):
        RUNNING = "running", "Running"
        STOPPED = "stopped", "Stopped"

    class Status(models.TextChoices):
        STARTING = "starting", "Starting"
        RUNNING = "running", "Running"
        STOPPED = "stopped", "Stopped"
        FAILED = "failed", "Failed"

    key = models.CharField(max_length=32, unique=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    desired = models.CharField(max_length=16, choices=Desired.choices, default=Desired.STOPPED)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.STOPPED)
    capacity = models.PositiveIntegerField(null=True, blank=True)
    log_path = models.CharField(max_length=500, blank=True, default="")
    restarts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    # When status last changed: a start claim older than the start timeout is abandoned.
    updated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return f"{self.key} ({self.status})"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}" if self.port else ""


class CatalogSnapshot(models.Model):
    """An imported `openenv catalog build` snapshot (webapp.catalog.snapshot).

    `entries` holds a bounded summary of each entry, not the file: identifier, names,
    description and what the entry says about its source and artifacts. Which bundled
    server an entry matches and whether it is registered are worked out when read.
    """

    name = models.CharField(max_length=100)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="catalog_snapshots",
    )
    uploaded_at = models.DateTimeField(auto_now_add=True)
    # The catalog profile the file declares ("0.1-draft" for openenv 0.10).
    format_version = models.CharField(max_length=32)
    publisher = models.CharField(max_length=253, blank=True, default="")
    source_uri = models.CharField(max_length=500, blank=True, default="")
    source_revision = models.CharField(max_length=64, blank=True, default="")
    digest = models.CharField(max_length=71, blank=True, default="")
    entries = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-uploaded_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.name} ({len(self.entries or [])} entries)"


class ConsoleConnection(models.Model):
    """One open console socket: a slot of its user's `ENVLAB_CONSOLE_MAX_SOCKETS`.

    In the database, not in one process's memory, so the cap holds across web processes.
    The consumer renews `expires_at` while it lives; a consumer that died without closing
    leaves a row that stops counting once it expires (webapp.catalog.console_sockets).
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="console_connections"
    )
    environment = models.ForeignKey(
        Environment, on_delete=models.CASCADE, related_name="console_connections"
    )
    opened_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["user", "expires_at"])]

    def __str__(self) -> str:
        return f"console of {self.environment_id} for {self.user_id}"
