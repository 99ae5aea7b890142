"""The run form's GRPO fieldset is built from the run config schema: every GRPO setting has
an input of its kind, with the schema's bounds and description, and what it sends is what the
schema reads."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from tests.webapp.pages import field_block, run_form_data
from webapp.catalog.models import Environment
from webapp.runs.config import GRPOSettings, parse_run_config
from webapp.runs.forms import REWARD_INITIAL, RunForm
from webapp.runs.grpo_fields import TRL_PASSTHROUGH
from webapp.runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_models")]


def _grpo_fieldset(page: str) -> str:
    match = re.search(r"<legend>GRPO</legend>(.*?)</fieldset>", page, re.S)
    assert match is not None
    return match.group(1)


def test_the_grpo_fieldset_is_the_schemas_grpo_fields(owner_client: Client, echo_env: Environment) -> None:
    page = owner_client.get(reverse("run-new")).content.decode()
    fieldset = _grpo_fieldset(page)
    names = re.findall(r'<div class="field[^"]*" id="field-([a-z0-9_]+)">', fieldset)
    assert names == [*(n for n in GRPOSettings.model_fields if n not in TRL_PASSTHROUGH), *TRL_PASSTHROUGH]
    assert set(names) == set(GRPOSettings.model_fields)
    # Type, bounds and help from the schema.
    top_p = field_block(page, "field-top_p")
    assert 'type="number"' in top_p and 'min="0"' in top_p and 'max="1"' in top_p and 'step="any"' in top_p
    assert escape(GRPOSettings.model_fields["top_p"].description) in top_p
    assert 'max="64"' in field_block(page, "field-num_generations")
    loss = field_block(page, "field-loss_type")
    assert re.findall(r'<option value="([a-z_]*)"', loss) == [
        "", "grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"
    ]
    assert re.findall(r'<option value="([a-z_]*)"', field_block(page, "field-bf16")) == ["", "true", "false"]


def test_what_the_grpo_inputs_send(echo_env: Environment) -> None:
    data = run_form_data(
        echo_env, loss_type="dr_grpo", scale_rewards="none", top_p="0.9", top_k="20", mask_truncated_completions="true",
        bf16="", gradient_checkpointing="false", warmup_steps="0.1", chat_template_kwargs='{"enable_thinking": true}',
    )
    form = RunForm(data)
    assert form.is_valid(), form.errors
    config = parse_run_config({**form.config_part(), "rewards": form.rewards_part(REWARD_INITIAL)})
    assert config.grpo is not None
    assert config.grpo.model_dump(include=set(TRL_PASSTHROUGH), exclude_none=True) == {
        "loss_type": "dr_grpo", "scale_rewards": "none", "top_p": 0.9, "top_k": 20,
        "mask_truncated_completions": True, "gradient_checkpointing": False, "warmup_steps": 0.1,
    }
    assert config.grpo.chat_template_kwargs == {"enable_thinking": True}
    # Left blank: not sent, TRL's default.
    blank = RunForm(run_form_data(echo_env))
    assert blank.is_valid(), blank.errors
    assert set(blank.config_part()["grpo"]) & set(TRL_PASSTHROUGH) == set()


def test_bf16_on_a_cpu_run_is_refused_next_to_its_input(owner_client: Client, echo_env: Environment) -> None:
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, bf16="true"))
    assert response.status_code == 200
    assert "bf16 mixed precision needs a CUDA GPU here" in field_block(response.content.decode(), "field-bf16")
    assert Run.objects.count() == 0
