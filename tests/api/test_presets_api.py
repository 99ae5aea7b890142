"""Presets (webapp/runs/presets.py): data files checked by the run config schema, listed by
`GET /api/presets/` with the caller's own environment id filled in, and offered on the new-run
page; a preset's config launches as it is."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

from webapp.runs import presets as presets_module
from webapp.runs.demo import demo_config
from webapp.runs.models import Run
from webapp.runs.presets import PresetError, fill_environment, preset_get, presets

pytestmark = pytest.mark.django_db


def test_every_preset_file_is_a_valid_run_config():
    assert [(p.slug, p.name, p.version) for p in presets()] == [
        ("catch-sft-grpo", "Catch: SFT warm-up, then GRPO", 1),
        ("dapo", "DAPO", 1), ("dr-grpo", "Dr. GRPO", 1), ("echo-demo", "Echo demo", 1),
        ("qwen3-lora-gpu", "Qwen3-0.6B LoRA on GPU", 1),
        ("wordle-sft-grpo", "Wordle: SFT warm-up, then GRPO with greens credit", 1),
    ]
    assert all(p.description and p.source for p in presets())
    assert [p.environment for p in presets()] == ["catch", "echo", "echo", "echo", "echo", "wordle"]


def test_the_demo_preset_is_the_demo_buttons_config():
    demo = preset_get(slug="echo-demo")
    assert demo is not None
    assert fill_environment(demo.config, 7) == demo_config(7)


def test_a_broken_preset_file_fails_at_load(tmp_path, monkeypatch):
    (tmp_path / "bad.json").write_text(json.dumps({
        "name": "Bad", "version": 1, "description": "d", "source": "s", "environment": "echo",
        "config": {"name": "b", "model": "demo:echo", "environments": [{"name": "echo"}], "grpo": {"loss_typo": "x"}},
    }))
    monkeypatch.setattr(presets_module, "PRESET_DIR", tmp_path)
    presets.cache_clear()
    try:
        with pytest.raises(PresetError, match=r"bad.json: not a valid run config: \{'grpo.loss_typo'"):
            presets()
    finally:
        monkeypatch.undo()
        presets.cache_clear()


def test_the_list_fills_in_each_callers_own_environment(api, outsider_api, client, echo_env):
    response = api.get("/api/presets/")
    assert response.status_code == 200
    rows = response.json()
    assert [row["slug"] for row in rows] == ["catch-sft-grpo", "dapo", "dr-grpo", "echo-demo", "qwen3-lora-gpu", "wordle-sft-grpo"]
    dr = rows[2]
    assert (dr["name"], dr["version"], dr["environment"]) == ("Dr. GRPO", 1, "echo")
    assert dr["config"]["environments"] == [
        {"environment": echo_env.pk, "name": "echo", "prompt": "Echo '{phrase}'.", "rows": 256}
    ]
    assert (dr["config"]["grpo"]["loss_type"], dr["config"]["grpo"]["scale_rewards"]) == ("dr_grpo", "none")
    # The owner's private entry is not the outsider's: they get 0, which a launch refuses.
    outsider_rows = outsider_api.get("/api/presets/").json()
    assert [item["environment"] for item in outsider_rows[2]["config"]["environments"]] == [0]
    assert client.get("/api/presets/").status_code in (401, 403)


@pytest.mark.parametrize("slug", ["dapo", "dr-grpo"])
def test_a_presets_config_launches_as_it_is(api, echo_env, built_model, slug):
    config = next(row["config"] for row in api.get("/api/presets/").json() if row["slug"] == slug)
    response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    preset = preset_get(slug=slug)
    assert preset is not None
    assert {k: run.config["grpo"][k] for k in preset.config["grpo"]} == preset.config["grpo"]


def test_the_new_run_page_starts_from_a_preset(owner_client, echo_env):
    page = owner_client.get(reverse("run-new")).content.decode()
    form = re.search(r'<form method="get"[^>]*id="preset-form">(.*?)</form>', page, re.S)
    assert form is not None
    assert re.findall(r'<option value="([a-z0-9-]+)"', form.group(1)) == ["catch-sft-grpo", "dapo", "dr-grpo", "echo-demo", "qwen3-lora-gpu", "wordle-sft-grpo"]
    page = owner_client.get(reverse("run-new") + "?preset=dapo").content.decode()
    assert '<details id="json-section" open>' in page
    match = re.search(r'<textarea name="config_json"[^>]*>(.*?)</textarea>', page, re.S)
    assert match is not None
    config = json.loads(html.unescape(match.group(1)))
    assert config["grpo"]["epsilon_high"] == 0.28 and config["environments"][0]["environment"] == echo_env.pk
    assert "arXiv:2503.14476" in page
    assert Run.objects.count() == 0


def test_the_catch_preset_launches_on_the_callers_catch_entry(api, owner, settings, tmp_path):
    from tests.envs.servers import run_env_server
    from tests.factories import EnvironmentFactory

    settings.MODELS_DIR = tmp_path
    with run_env_server("envs.catch.server:app") as url:
        # What registration records for a catch server: the bundled adapter (and with it the solver).
        catch = EnvironmentFactory(owner=owner, name="catch", base_url=url, capacity=64,
                                   metadata={"name": "catch", "style": "bundled", "adapter": "catch"})
        config = next(row["config"] for row in api.get("/api/presets/").json() if row["slug"] == "catch-sft-grpo")
        assert config["environments"][0]["environment"] == catch.pk
        # Its base model is a variant of its own: the refusal says how to build it.
        refused = api.post("/api/runs/", config, format="json")
        assert refused.status_code == 400
        assert "`python manage.py build_demo_model catch-base --variant catch-base`" in json.dumps(refused.json())
        assert Run.objects.count() == 0
        (tmp_path / "catch-base").mkdir()
        (tmp_path / "catch-base" / "config.json").write_text("{}")
        response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.model, run.config["sft_warmup"]["episodes"], run.config["grpo"]["learning_rate"]) == (
        "demo:catch-base", 300, 0.0003,
    )


def test_the_wordle_preset_launches_on_the_callers_wordle_entry(api, owner, built_model):
    from tests.envs.servers import run_env_server
    from tests.factories import EnvironmentFactory

    with run_env_server("envs.wordle.server:app") as url:
        EnvironmentFactory(owner=owner, name="wordle", base_url=url, capacity=64,
                           metadata={"name": "wordle", "style": "bundled", "adapter": "wordle"})
        config = next(row["config"] for row in api.get("/api/presets/").json() if row["slug"] == "wordle-sft-grpo")
        response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.model, [t["kind"] for t in run.config["rewards"]]) == (built_model, ["env_reward", "partial_credit"])
