"""The run form's SFT warm-up and saved-recipe inputs: what they put in the run config, and
their errors next to the input, with no run created."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.webapp.pages import field_block, run_form_data
from webapp.catalog.models import Environment
from webapp.rewards.services import recipe_create
from webapp.runs.config import parse_run_config
from webapp.runs.forms import REWARD_INITIAL, WARMUP_FIELDS, RunForm
from webapp.runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_models")]



RECIPE = {"name": "wordle-guide", "terms": [{"name": "env_reward", "kind": "env_reward"}]}


def _config(data: dict[str, Any], user: User | None = None) -> dict[str, Any]:
    form = RunForm(data)
    if user is not None:
        from webapp.rewards.selectors import recipes_visible_to

        form.fields["reward_recipe"].queryset = recipes_visible_to(user=user)
    assert form.is_valid(), form.errors
    return {**form.config_part(), "rewards": form.rewards_part(REWARD_INITIAL)}


def test_the_form_shows_the_warm_up_and_recipe_inputs(owner_client: Client, echo_env: Environment) -> None:
    page = owner_client.get(reverse("run-new")).content.decode()
    for name in ("warmup_enabled", *WARMUP_FIELDS, "warmup_only", "reward_recipe"):
        assert f'id="field-{name}"' in page, name
    assert 'name="warmup_episodes" value="64"' in page  # the schema's default


def test_a_solver_warm_up_then_grpo_and_a_warm_up_alone(echo_env: Environment) -> None:
    data = run_form_data(
        echo_env, warmup_enabled="on", warmup_source="solver", warmup_episodes="32", warmup_epochs="3",
        warmup_learning_rate="0.0005", warmup_min_reward="1.0", warmup_run="7",  # a stray id is dropped
    )
    config = parse_run_config(_config(data))
    assert config.sft_warmup is not None and config.grpo is not None
    assert (config.sft_warmup.source, config.sft_warmup.run, config.sft_warmup.episodes, config.sft_warmup.epochs) == ("solver", None, 32, 3)
    assert config.sft_warmup.learning_rate == 0.0005

    alone = parse_run_config(_config({**data, "warmup_only": "on"}))
    assert alone.grpo is None and alone.sft_warmup is not None

    without = parse_run_config(_config(run_form_data(echo_env, warmup_source="run", warmup_run="3")))
    assert without.sft_warmup is None  # the box unticked: the other inputs are ignored


def test_warm_up_errors_sit_next_to_their_inputs_and_no_run_is_made(owner_client: Client, echo_env: Environment) -> None:
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, warmup_enabled="on", warmup_source="run"))
    assert response.status_code == 200
    assert "needs the id of the run" in field_block(response.content.decode(), "field-warmup_run")
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, warmup_only="on"))
    content = response.content.decode()
    assert "warm-up" in field_block(content, "field-warmup_only").lower()
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, warmup_enabled="on", warmup_epochs="0"))
    assert "greater than or equal to 1" in field_block(response.content.decode(), "field-warmup_epochs")
    assert Run.objects.count() == 0


def test_a_saved_recipe_replaces_the_terms_and_only_the_users_own_are_offered(
    owner: User, outsider: User, owner_client: Client, echo_env: Environment
) -> None:
    mine = recipe_create(owner=owner, data=RECIPE)
    theirs = recipe_create(owner=outsider, data={**RECIPE, "name": "theirs"})
    page = owner_client.get(reverse("run-new")).content.decode()
    recipe_field = field_block(page, "field-reward_recipe")
    assert f'value="{mine.pk}"' in recipe_field and f'value="{theirs.pk}"' not in recipe_field

    assert _config(run_form_data(echo_env, reward_recipe=str(mine.pk)), owner)["rewards"] == {"recipe": mine.pk}
    assert _config(run_form_data(echo_env), owner)["rewards"] == REWARD_INITIAL

    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, reward_recipe=str(theirs.pk)))
    assert "Select a valid choice" in field_block(response.content.decode(), "field-reward_recipe")
    assert Run.objects.count() == 0
