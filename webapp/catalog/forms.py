"""Form input for the catalog. Field rules beyond shape live in the services."""

from __future__ import annotations

from django import forms

from webapp.catalog.bundled import MAX_CAPACITY


class EnvironmentRegisterForm(forms.Form):
    """Mirrors webapp.catalog.services.environment_register: one field per argument."""

    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(
        required=False,
        choices=[("", "detect"), ("openenv", "OpenEnv"), ("ors", "Open Reward Standard")],
        help_text="Leave on 'detect' to find out from the server.",
    )
    # Plain text fields: the service checks them and says what to fix.
    base_url = forms.CharField(
        max_length=500,
        required=False,
        label="Base URL",
        widget=forms.TextInput(attrs={"placeholder": "http://127.0.0.1:8001"}),
        help_text="A running server. Give one of base URL, image or ORS catalog name.",
    )
    image = forms.CharField(
        max_length=300,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "registry/name:tag"}),
        help_text="A container image to start here (needs Docker).",
    )
    ors_catalog = forms.CharField(
        max_length=201,
        required=False,
        label="ORS catalog",
        widget=forms.TextInput(attrs={"placeholder": "Org/Env"}),
        help_text="An Open Reward catalog environment.",
    )
    ors_env = forms.CharField(
        max_length=100,
        required=False,
        label="ORS environment",
        help_text=(
            "Which environment of an ORS server hosting several. Leave empty to register every one, "
            "named <name>-<environment>."
        ),
    )
    api_key_env = forms.CharField(
        max_length=100,
        required=False,
        label="API key variable",
        widget=forms.TextInput(attrs={"placeholder": "OPENREWARD_API_KEY"}),
        help_text=(
            "With an ORS catalog name only: an allowed variable holding the installation's key "
            "(OPENREWARD_API_KEY by default). Or leave it empty and store your own key on your account page."
        ),
    )
    capacity = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=100_000,
        help_text="Concurrent sessions the server accepts (optional).",
    )
    measure_capacity = forms.BooleanField(
        required=False,
        label="Measure capacity",
        help_text="OpenEnv only: open sessions until the server refuses.",
    )
    shared = forms.BooleanField(
        required=False,
        label="Shared",
        help_text="Every user sees it and may train on it; only you (and administrators) change it.",
    )


class BundledStartForm(forms.Form):
    capacity = forms.IntegerField(required=False, min_value=1, max_value=MAX_CAPACITY)
