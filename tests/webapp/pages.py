"""What the page tests share beside fixtures (tests/webapp/conftest.py): the echo tool's
schema, the run form's complete data, one form field's HTML, and a run row made by hand."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import User

from tests.factories import RunFactory
from webapp.catalog.models import Environment
from webapp.runs.models import Run

XSS = "<script>alert(1)</script>"
# What another user is told of an entry shared with them that they may not control.
REFUSAL = (
    "'{name}' is owned by 'owner': only its owner, or a user with the permission "
    "catalog.change_environment, may probe it, measure it, open its console or change it"
)

ECHO_TOOLS = [
    {
        "name": "echo",
        "description": "Echo a message back.",
        "parameters": {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "What to echo."}},
            "required": ["message"],
        },
    }
]


def run_form_data(environment: Environment, **overrides: Any) -> dict[str, Any]:
    data = {
        "mode": "form",
        "name": "form-run",
        "model": "demo:echo",
        "environment": str(environment.pk),
        "prompt": "Echo '{phrase}'.",
        "rows": "64",
        "num_generations": "4",
        "max_steps": "30",
        "learning_rate": "5e-05",
        "per_device_train_batch_size": "4",
        "gradient_accumulation_steps": "1",
        "max_completion_length": "64",
        "temperature": "1.0",
        "beta": "0.0",
        "seed": "0",
        "alerts_enabled": "on",
        "alert_stop_on": ["nonfinite"],
        "rewards-TOTAL_FORMS": "3",
        "rewards-INITIAL_FORMS": "1",
        "rewards-MIN_NUM_FORMS": "0",
        "rewards-MAX_NUM_FORMS": "32",
        "rewards-0-name": "env_reward",
        "rewards-0-kind": "env_reward",
        "rewards-0-weight": "1.0",
        "rewards-1-name": "",
        "rewards-1-kind": "env_reward",
        "rewards-1-weight": "1.0",
        "rewards-2-name": "",
        "rewards-2-kind": "env_reward",
        "rewards-2-weight": "1.0",
    }
    data.update(overrides)
    return data


def field_block(content: str, field_id: str) -> str:
    """The HTML of one form field's wrapper (label, input, errors)."""
    match = re.search(
        rf'<div class="field[^"]*" id="{re.escape(field_id)}">(.*?)</div>', content, re.S
    )
    assert match, f"no field {field_id} in the page"
    return match.group(1)


def make_run(
    user: User, *, status: str = Run.Status.QUEUED, name: str = "my-run", **fields: Any
) -> Run:
    config = {"name": name, "model": "demo:echo", "note": XSS}
    return RunFactory(owner=user, name=name, config=config, max_steps=30, status=status, **fields)
