"""Per-user secrets (an Open Reward API key, a Hugging Face token, a notification URL), encrypted at rest."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class UserSecret(models.Model):
    class Name(models.TextChoices):
        OPENREWARD_API_KEY = "openreward_api_key", "Open Reward API key"
        HF_TOKEN = "hf_token", "Hugging Face token"
        # An apprise URL (json://, ntfys://, slack://...) run notifications go to (webapp/runs/telemetry/notify.py).
        NOTIFY_URL = "notify_url", "Notification URL"
        # Given to the user's runs that report to W&B (`report_to`), where the worker's operator set no key.
        WANDB_API_KEY = "wandb_api_key", "Weights & Biases API key"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=32, choices=Name.choices)
    # Fernet token of the value (webapp.accounts.secrets); never the value itself.
    ciphertext = models.TextField()
    # Shown as "set (…abcd)" so a user can tell which key is stored.
    last4 = models.CharField(max_length=4)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="one_secret_per_user_and_name")]

    def __str__(self) -> str:
        return f"{self.name} of user {self.user_id} (…{self.last4})"


class RunChartLayout(models.Model):
    """How a user arranges the charts of every run page: the metric charts they added and
    each chart's smoothing, y scale and x axis. Its shape is checked by
    webapp.runs.telemetry.layout before it is stored; one row per user, for all runs."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="run_chart_layout"
    )
    layout = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"run chart layout of user {self.user_id}"


class TokenName(models.Model):
    """The name a user gave an API token made on the account page or with POST /api/auth/tokens/
    (knox's token has none), to tell "laptop" from "cluster" when revoking."""

    token = models.OneToOneField("knox.AuthToken", on_delete=models.CASCADE, related_name="label")
    name = models.CharField(max_length=80)

    def __str__(self) -> str:
        return self.name
