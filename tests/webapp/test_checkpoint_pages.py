"""The run page lists checkpoints; the run form starts a run from one (`run:<id>@<step>`)."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import RunFactory
from tests.webapp.pages import field_block, run_form_data
from webapp.catalog.models import Environment
from webapp.runs.forms import RunForm, model_spec
from webapp.runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_models")]


@pytest.fixture
def trained(owner, settings, tmp_path) -> Run:
    settings.RUNS_DIR = tmp_path / "runs"
    run = RunFactory(
        owner=owner, name="trained", max_steps=4, status="succeeded", checkpoint_step=4,
    )
    for step in (2, 4):
        folder = settings.RUNS_DIR / str(run.pk) / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "trainer_state.json").write_text("{}")
    return run


def test_the_run_page_lists_checkpoints_with_a_link_to_start_from_each(owner_client: Client, trained: Run) -> None:
    page = owner_client.get(reverse("run-detail", args=[trained.pk])).content.decode()
    section = page[page.index('id="checkpoints"'):page.index("</section>", page.index('id="checkpoints"'))]
    assert [int(s) for s in _attr_values(section, "data-step")] == [2, 4]
    assert f'href="/runs/new/?model=run:{trained.pk}@4"' in section
    assert f'<code>{{"run": {trained.pk}, "checkpoint": 2}}</code>' in section


def test_a_run_without_checkpoints_says_so(owner_client: Client, owner) -> None:
    run = RunFactory(owner=owner, name="new", max_steps=4)
    page = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "No checkpoint yet" in page


def test_the_run_form_takes_the_model_from_the_link(owner_client: Client, echo_env: Environment, trained: Run) -> None:
    page = owner_client.get(reverse("run-new") + f"?model=run:{trained.pk}@2").content.decode()
    assert f'value="run:{trained.pk}@2"' in field_block(page, "field-model")


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("run:12@5", {"run": 12, "checkpoint": 5}),
        (" run:12@last ", {"run": 12, "checkpoint": "last"}),
        ("run:12@0", {"run": 12, "checkpoint": 0}),
        ("run:12", "run:12"),  # not a reference: the schema refuses it as a model name
        ("run:x@5", "run:x@5"),
        ("demo:echo", "demo:echo"),
    ],
)
def test_model_spec_reads_the_checkpoint_label(text: str, spec: Any) -> None:
    assert model_spec(text) == spec


def test_a_checkpoint_error_shows_next_to_the_model_input_and_creates_no_run(
    owner_client: Client, echo_env: Environment, trained: Run
) -> None:
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, model=f"run:{trained.pk}@3"))
    assert response.status_code == 200
    assert f"run {trained.pk} has no checkpoint at step 3; it has 2, 4" in html.unescape(
        field_block(response.content.decode(), "field-model")
    )
    assert list(Run.objects.values_list("name", flat=True)) == ["trained"]


def test_the_form_config_carries_the_reference(echo_env: Environment, trained: Run) -> None:
    form = RunForm(run_form_data(echo_env, model=f"run:{trained.pk}@last"))
    assert form.is_valid(), form.errors
    assert form.config_part()["model"] == {"run": trained.pk, "checkpoint": "last"}


def _attr_values(text: str, attr: str) -> list[str]:
    import re

    return re.findall(rf'{attr}="([^"]*)"', text)
