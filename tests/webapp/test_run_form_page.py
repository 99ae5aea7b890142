"""The new-run page's form: every input, its defaults from the schema, and each error shown
next to its input with nothing created.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.webapp.pages import field_block, run_form_data
from webapp.catalog.models import Environment
from webapp.runs.config import parse_run_config
from webapp.runs.forms import ALERT_FIELDS, REWARD_INITIAL, RunForm
from webapp.runs.models import Run, RunEvent

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_models")]


# --- the run form -----------------------------------------------------------------------------


def test_run_form_renders_every_input_with_schema_defaults(
    owner_client: Client, echo_env: Environment
) -> None:
    response = owner_client.get(reverse("run-new"))

    content = response.content.decode()
    assert response.status_code == 200
    for name in [
        "name",
        "model",
        "environment",
        "prompt",
        "rows",
        "num_generations",
        "max_steps",
        "learning_rate",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "max_completion_length",
        "temperature",
        "beta",
        "seed",
    ]:
        assert f'id="field-{name}"' in content, name
    assert f'<option value="{echo_env.pk}" selected>echo (healthy)</option>' in content
    assert 'name="rewards-0-name" value="env_reward"' in content
    assert 'name="num_generations" value="4"' in content
    assert 'id="id_config_json"' in content


def test_run_form_sets_the_run_health_thresholds_and_which_alerts_stop_the_run(
    owner_client: Client, echo_env: Environment
) -> None:
    page = owner_client.get(reverse("run-new")).content.decode()
    for name in ALERT_FIELDS:
        assert f'id="field-{name}"' in page, name
    assert 'name="alert_tool_failure_rate" value="0.5"' in page
    assert re.search(r'<input type="checkbox" name="alert_stop_on" value="nonfinite"[^>]*checked', page)

    def config(data: dict[str, Any]) -> Any:
        form = RunForm(data)
        assert form.is_valid(), form.errors
        return parse_run_config({**form.config_part(), "rewards": REWARD_INITIAL}).alerts

    alerts = config(run_form_data(
        echo_env, alert_tool_failure_rate="0.25", alert_tool_failure_steps="2",
        alert_stop_on=["nonfinite", "tool_failures"],
    ))
    assert (alerts.enabled, alerts.tool_failure_rate, alerts.tool_failure_steps) == (True, 0.25, 2)
    assert alerts.stop_on == ["nonfinite", "tool_failures"]
    assert alerts.zero_variance_frac == 0.9  # left as shown: the default

    data = run_form_data(echo_env, alert_stop_on=[], alert_entropy_min="")
    del data["alerts_enabled"]  # an unticked box is not sent
    alerts = config(data)
    assert (alerts.enabled, alerts.stop_on, alerts.entropy_min) == (False, [], 0.01)


def test_run_form_puts_an_alert_threshold_error_next_to_its_input_and_creates_no_run(
    owner_client: Client, echo_env: Environment
) -> None:
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, alert_zero_variance_frac="2"))
    assert response.status_code == 200
    assert "less than or equal to 1" in field_block(response.content.decode(), "field-alert_zero_variance_frac")
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, alert_stop_on=["launch_the_missiles"]))
    content = response.content.decode()
    stop_on = content[content.index('id="field-alert_stop_on"'):content.index('id="field-alert_stop_on"') + 3000]
    assert "not one of the available choices" in stop_on
    assert Run.objects.count() == 0


def test_run_form_puts_a_schema_error_next_to_num_generations_and_creates_no_run(
    owner_client: Client, echo_env: Environment
) -> None:
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, num_generations="3"))

    content = response.content.decode()
    assert response.status_code == 200
    expected = html.escape(
        "num_generations (3) must divide the generation batch size per_device_train_batch_size "
        "x gradient_accumulation_steps (4 x 1 = 4)"
    )
    assert f'<p class="field-error">{expected}</p>' in field_block(content, "field-num_generations")
    assert "field-error" not in field_block(content, "field-per_device_train_batch_size")
    assert 'id="run-form-errors"' not in content
    assert Run.objects.count() == 0
    assert RunEvent.objects.count() == 0


def test_run_form_maps_environment_and_reward_errors_and_lists_unknown_keys_at_the_top(
    owner_client: Client, echo_env: Environment
) -> None:
    data = run_form_data(echo_env, prompt="", max_steps="0")
    data["rewards-1-name"] = "Bad Name"

    response = owner_client.post(reverse("run-new"), data)

    content = response.content.decode()
    assert response.status_code == 200
    # prompt is required by the form itself; the schema errors come once the shape is right.
    assert "This field is required." in field_block(content, "field-prompt")
    assert Run.objects.count() == 0

    response = owner_client.post(reverse("run-new"), {**data, "prompt": "Echo 'x'."})

    content = response.content.decode()
    assert "Input should be greater than or equal to 1" in field_block(content, "field-max_steps")
    reward_cell = re.search(
        r'<td class="has-error" id="field-rewards-1-name">(.*?)</td>', content, re.S
    )
    assert reward_cell and html.escape(
        "use lowercase letters, digits and '_', starting with a letter"
    ) in reward_cell.group(1)
    assert Run.objects.count() == 0


def test_run_form_raw_json_reports_bad_json_and_each_dotted_error(
    owner_client: Client, echo_env: Environment
) -> None:
    bad_json = owner_client.post(reverse("run-new"), {"mode": "json", "config_json": "{nope"})
    assert (
        "not valid JSON: Expecting property name enclosed in double quotes at line 1, column 2"
        in (bad_json.content.decode())
    )

    config = {
        "name": "json-run",
        "model": "demo:echo",
        "environments": [{"environment": echo_env.pk, "prompt": "Echo 'a'."}],
        "grpo": {"num_generations": 3, "per_device_train_batch_size": 4},
        "surprise": 1,
    }
    response = owner_client.post(
        reverse("run-new"), {"mode": "json", "config_json": json.dumps(config)}
    )

    content = response.content.decode()
    errors = re.search(
        r'<ul class="errors" id="run-json-errors" role="alert">(.*?)</ul>', content, re.S
    )
    assert errors
    items = re.findall(r"<li>(.*?)</li>", errors.group(1))
    assert items == [
        html.escape(
            "grpo.num_generations: num_generations (3) must divide the generation batch size "
            "per_device_train_batch_size x gradient_accumulation_steps (4 x 1 = 4)"
        ),
        "surprise: Extra inputs are not permitted",
    ]
    assert 'id="json-section" open' in content
    assert Run.objects.count() == 0
