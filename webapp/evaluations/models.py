"""Evaluations: fixed, seeded episodes played by each of several models (or reference
policies), every episode's transcript kept. The table is computed from the stored episodes
(webapp.evaluations.selectors.evaluation_results), never stored beside them."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.core.models import ClaimedWork


class Evaluation(ClaimedWork):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="evaluations"
    )
    # SET_NULL: an evaluation outlives its environment's row (its episodes are what it is).
    environment = models.ForeignKey(
        "catalog.Environment", null=True, on_delete=models.SET_NULL, related_name="evaluations"
    )
    environment_name = models.CharField(max_length=200)
    # The bundled key (echo, wordle, catch, sudoku) or "" for another server: picks the solver
    # and the table's environment-specific columns.
    environment_key = models.CharField(max_length=32, blank=True, default="")
    prompt = models.TextField()
    # [{"spec": as given (a string or {"run", "checkpoint"} pinned to a step), "label": how it
    # is shown, "kind": "solver" | "random" | "model", "run": id or None, "step": int or None}]
    model_specs = models.JSONField()
    episodes = models.PositiveIntegerField()
    seed = models.PositiveBigIntegerField()
    # The episode seeds to play, one episode each, when given (the arena's side by side plays
    # one chosen seed); empty: the episodes' seeds are drawn from `seed`.
    episode_seeds = models.JSONField(default=list, blank=True)
    # Generation settings for models: max_completion_length, max_tool_calling_iterations,
    # chat_template_kwargs (TRL's meaning of each).
    settings = models.JSONField(default=dict)
    # The run whose checkpoints this evaluation measures ("evaluate checkpoints"), if any.
    source_run = models.ForeignKey(
        "runs.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="checkpoint_evaluations",
    )
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"#{self.pk} {self.environment_name} ({self.status})"


class EvaluationEpisode(models.Model):
    """One episode one model played: its transcript and what it scored."""

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="played")
    model_index = models.PositiveIntegerField()
    model = models.CharField(max_length=500)
    index = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    messages = models.JSONField(default=list)
    reward = models.FloatField()
    won = models.BooleanField(default=False)
    tool_calls = models.PositiveIntegerField(default=0)
    tool_failures = models.PositiveIntegerField(default=0)
    lost = models.BooleanField(default=False)
    ended_by = models.CharField(max_length=16, blank=True, default="")
    # envs.adapters.attributes.episode_attributes of the finished episode.
    attributes = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model_index", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "model_index", "index"], name="evaluation_episode_unique"
            )
        ]

    def __str__(self) -> str:
        return f"episode {self.index} of model {self.model_index} in evaluation {self.evaluation_id}"
