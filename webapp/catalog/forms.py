"""Form input for the catalog. Field rules beyond shape live in the service."""

from __future__ import annotations

from django import forms


class EnvironmentRegisterForm(forms.Form):
    name = forms.CharField(max_length=100)
    # A plain text field: the service checks the URL and says what to fix.
    base_url = forms.CharField(
        max_length=500,
        label="Base URL",
        widget=forms.TextInput(attrs={"placeholder": "http://127.0.0.1:8001"}),
    )
    capacity = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=100_000,
        help_text="Concurrent sessions the server accepts (optional).",
    )
