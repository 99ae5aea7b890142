"""Training runs and what they record: metrics per step and rollout transcripts."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.conf import settings
from django.db import models

from webapp.core.models import ClaimedWork

GROUP_MAX_LENGTH = 120
TAG_MAX_LENGTH = 40


class Run(ClaimedWork):
    class Status(models.TextChoices):
        # A sweep's member waiting for a free slot of its owner's quota (webapp/sweeps): no task
        # is sent for it and it counts against no quota until it is released (queued).
        PENDING = "pending", "Pending"
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        INTERRUPTED = "interrupted", "Interrupted"

    class Phase(models.TextChoices):
        WARMUP = "warmup", "SFT warm-up"
        GRPO = "grpo", "GRPO"

    class Failure(models.TextChoices):
        """Why a failed run failed, as the worker classified it (worker/training/lifecycle.py)."""

        CONFIG = "config", "Configuration error"
        MODEL = "model", "Model error"
        ALERT = "alert", "Stopped by a run-health alert"
        INFRASTRUCTURE = "infrastructure", "Infrastructure failure"
        ERROR = "error", "Unclassified error"

    ACTIVE = (Status.QUEUED, Status.RUNNING)
    # Not ended yet: the active ones and those waiting in a sweep.
    NOT_ENDED = (Status.PENDING, Status.QUEUED, Status.RUNNING)
    RESUMABLE = (Status.INTERRUPTED, Status.CANCELLED)
    # Failures that say nothing against the run itself (a worker, a machine, a network or a
    # server that went away): a failed run with one resumes from its last checkpoint.
    RESUMABLE_FAILURES = (Failure.INFRASTRUCTURE,)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=120)
    # The validated RunConfig (webapp.runs.config), as JSON; an external run's config is the
    # JSON object its script sent (webapp/runs/external.py), which need not be a RunConfig.
    config = models.JSONField()
    # Trained outside the lab (a script with envlab_client.trl.EnvlabCallback): no task, no
    # worker; the script logs over the API under a lease the lab holds for it.
    external = models.BooleanField(default=False)
    model = models.CharField(max_length=500)
    # Where it trains, decided once at launch from the config (webapp/runs/routing.py): the
    # Celery queue its train task goes to, and what a worker needs to carry it.
    queue = models.CharField(max_length=40, default="train")
    needs_gpus = models.PositiveSmallIntegerField(default=0)
    needs_vllm = models.BooleanField(default=False)
    environments = models.ManyToManyField("catalog.Environment", related_name="runs", blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    # What the worker trains now; `step` counts that phase's steps (SFT steps in the warm-up).
    phase = models.CharField(max_length=8, choices=Phase.choices, default=Phase.GRPO)
    step = models.PositiveIntegerField(default=0)
    max_steps = models.PositiveIntegerField()
    # A failed run's class of failure (Run.Failure); "" for any other status, and for runs
    # that failed before failures were classified.
    failure = models.CharField(max_length=16, choices=Failure.choices, blank=True, default="")
    # The lease (who trains the run, the claiming message's task id...) is ClaimedWork's.
    # The train task's messages: when the last one went to the broker (None: the last send
    # failed, beat re-sends it) and how many went since the run was last queued.
    sent_at = models.DateTimeField(null=True, blank=True)
    sends = models.PositiveIntegerField(default=0)
    checkpoint_step = models.PositiveIntegerField(null=True, blank=True)
    # Last telemetry sequence number handed out for this run.
    last_seq = models.PositiveBigIntegerField(default=0)
    # The token of the last telemetry chunk stored (webapp/runs/telemetry/record.py): a worker
    # that retries a write whose commit it did not hear of sends it again, and it is not stored twice.
    telemetry_chunk = models.CharField(max_length=64, blank=True, default="")
    # How its owner files it (webapp/runs/labels.py): a group of runs that belong together
    # (seeds of one setting, a sweep) and free notes; tags are RunTag rows.
    group = models.CharField(max_length=GROUP_MAX_LENGTH, blank=True, default="", db_index=True)
    notes = models.TextField(blank=True, default="")

    class Meta(ClaimedWork.Meta):
        indexes = [
            # The runs table's default page (webapp/runs/table.py): a user's newest runs, read
            # from the index instead of sorting all of them.
            models.Index(fields=["owner", "-created_at", "-id"], name="run_owner_newest"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.name} ({self.status})"


class RunTag(models.Model):
    """One tag (a slug) on a run: rows, not a JSON list, so that a filter by tag is an indexed
    join on every database (SQLite has no JSON containment)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tags")
    slug = models.SlugField(max_length=TAG_MAX_LENGTH)

    class Meta:
        ordering = ["slug"]
        constraints = [models.UniqueConstraint(fields=["run", "slug"], name="run_tag_unique_slug")]
        indexes = [models.Index(fields=["slug", "run"], name="run_tag_slug_run")]

    def __str__(self) -> str:
        return self.slug


class MetricPoint(models.Model):
    """One value TRL logged at one step. A step re-run after a resume replaces its values."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metrics")
    step = models.PositiveIntegerField()
    key = models.CharField(max_length=120)
    value = models.FloatField(null=True)
    seq = models.PositiveBigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "step", "key"], name="metric_unique_run_step_key")
        ]
        indexes = [
            # Covering: a series is bucketed from the index alone (selectors.run_metric_series).
            models.Index(fields=["run", "key", "step", "value"], name="metric_run_key_step_value"),
            models.Index(fields=["run", "seq"]),
        ]

    def __str__(self) -> str:
        return f"{self.key} = {self.value} at step {self.step} of run {self.run_id}"


class MetricTier(models.Model):
    """One key's lowest and highest point over the steps [start, start + width), a block of
    a downsampled series kept so that a long run's chart reads few rows
    (webapp/runs/telemetry/metric_tiers.py). A cache of MetricPoint: made on read, dropped where the
    points it was made of change."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metric_tiers")
    key = models.CharField(max_length=120)
    width = models.PositiveIntegerField()
    start = models.PositiveIntegerField()
    min_step = models.PositiveIntegerField()
    min_value = models.FloatField()
    max_step = models.PositiveIntegerField()
    max_value = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "key", "width", "start"], name="metric_tier_unique_block")
        ]

    def __str__(self) -> str:
        end = self.start + self.width
        return f"{self.key} over steps [{self.start}, {end}) of run {self.run_id}"


class MetricTierMark(models.Model):
    """How far one key's tiers go: complete and true below `through_step`, as of the points
    up to the run's `seq` (a later point below the mark is a replaced step)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metric_tier_marks")
    key = models.CharField(max_length=120)
    through_step = models.PositiveIntegerField()
    seq = models.PositiveBigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="metric_tier_mark_unique_key")]

    def __str__(self) -> str:
        return f"{self.key} tiers through step {self.through_step} of run {self.run_id}"


def prompt_key(env: str, prompt: Any, seed: int | None) -> str:
    """One training prompt's identity across steps: its environment, its messages and its
    row seed (rows with the same text but another seed are other episodes)."""
    payload = json.dumps([env, prompt, seed], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Rollout(models.Model):
    """One completed episode: the full multi-turn transcript and its scores."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rollouts")
    seq = models.PositiveBigIntegerField()
    step = models.PositiveIntegerField()
    env = models.CharField(max_length=64, blank=True, default="")
    # The row's seed (the same seed replays the same episode) and the training prompt it
    # came from (prompt_key(): env, prompt and seed), to follow one prompt across steps.
    seed = models.BigIntegerField(null=True, blank=True)
    prompt_key = models.CharField(max_length=32, blank=True, default="")
    prompt = models.JSONField(default=list)
    messages = models.JSONField(default=list)
    # {term name: value or None (term not applicable, or the rollout is unscored)}
    rewards = models.JSONField(default=dict)
    reward = models.FloatField(null=True)
    advantage = models.FloatField(null=True)
    # The environment lost the episode mid-way (its server restarted): every term is None.
    unscored = models.BooleanField(default=False)
    # What the reward terms scored: {"attributes": {name: float}, "components": {...},
    # "completion_tokens": int, "completion_chars": int}; {} for rollouts stored before it.
    episode = models.JSONField(default=dict, blank=True)
    # The transcript's tool results, summed at write time so the rollout search filters by
    # tool in SQL: {tool name (safe_tool_name): {"calls": n, "failures": n}} and the failures
    # of every tool together. Rollouts stored before these fields count as using no tool.
    tools = models.JSONField(default=dict, blank=True)
    tool_failures = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="rollout_unique_run_seq")]
        indexes = [
            models.Index(fields=["run", "step"]),
            models.Index(fields=["run", "prompt_key", "step"], name="rollout_run_prompt_step"),
        ]

    def __str__(self) -> str:
        return f"rollout {self.seq} (step {self.step}) of run {self.run_id}"


class RunEvent(models.Model):
    """Something that happened to a run: claimed, taken over, resumed, cancelled, failed."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32)
    message = models.TextField(blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} of run {self.run_id}"


class WorkerHeartbeat(models.Model):
    """A Celery worker's last sign of life and what it can do."""

    name = models.CharField(max_length=200, unique=True)
    capabilities = models.JSONField(default=dict)
    heartbeat_at = models.DateTimeField()
    current_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL)

    def __str__(self) -> str:
        return self.name


class RunNotification(models.Model):
    """A message about a run for its owner's `notify_url` (webapp/runs/telemetry/notify.py). One row per
    (run, event identity), made in the transaction that records the event: a resumed or
    taken-over run that raises the same alert again at the same step, or a redelivered task,
    finds the row and sends nothing twice. The light worker's task sends only a pending row it
    moved to `sending` itself."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        SENDING = "sending", "Sending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="notifications")
    # "finished:attempt<n>", "failed:attempt<n>" or "alert:<kind>:<step>" (webapp/runs/telemetry/notify.py).
    key = models.CharField(max_length=96)
    # What the message says: kind ("finished", "failed", "alert"), status, alert kind, step, message.
    data = models.JSONField(default=dict)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="one_notification_per_run_event")]

    def __str__(self) -> str:
        return f"notification {self.key} of run {self.run_id} ({self.state})"
