"""TRL's own GRPO settings over the launch API (webapp/runs/grpo_fields.py): bf16 and gradient
checkpointing refused on CPU with a message naming the field, nothing written; the SFT warm-up
under `sft_warmup`, the old `warmup` key accepted with a deprecation warning."""

from __future__ import annotations

import pytest

from tests.factories import RolloutFactory, RunFactory
from tests.support.run_launch import launch_config as config
from tests.support.run_launch import launch_refused as refused
from webapp.runs.config import DEPRECATIONS, RunConfig
from webapp.runs.grpo_fields import CPU_REFUSED, TRL_PASSTHROUGH
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import LAUNCH_WARNING

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["bf16", "gradient_checkpointing"])
def test_bf16_and_gradient_checkpointing_are_refused_on_cpu(api, echo_env, built_model, name):
    errors = refused(api, config(echo_env.pk, grpo={name: True}))
    assert errors == {f"grpo.{name}": [CPU_REFUSED[name]]}
    assert "device 'cpu'" in errors[f"grpo.{name}"][0]


def test_an_unknown_grpo_name_is_refused_with_its_dotted_key(api, echo_env, built_model):
    assert refused(api, config(echo_env.pk, grpo={"warmup_ratio": 0.1, "report_to": "wandb"})) == {
        "grpo.warmup_ratio": ["Extra inputs are not permitted"],
        "grpo.report_to": ["Extra inputs are not permitted"],
    }


def test_bf16_off_on_cpu_and_on_with_checkpointing_on_cuda_are_stored_as_given(api, echo_env, built_model):
    response = api.post("/api/runs/", config(echo_env.pk, grpo={"bf16": False, "top_p": 0.9}), format="json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    # Only the TRL fields the run set are stored.
    assert {k: v for k, v in run.config["grpo"].items() if k in TRL_PASSTHROUGH} == {"bf16": False, "top_p": 0.9}
    cuda = config(echo_env.pk, device="cuda", wait_for_worker=True, grpo={"bf16": True, "gradient_checkpointing": True})
    response = api.post("/api/runs/", cuda, format="json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.config["grpo"]["bf16"], run.config["grpo"]["gradient_checkpointing"], run.needs_gpus) == (True, True, 1)
    assert response.json()["warnings"] == []


def test_the_deprecated_warmup_key_launches_as_sft_warmup_with_a_warning(api, owner, echo_env, built_model):
    source = RunFactory(owner=owner, name="src", max_steps=1)
    RolloutFactory(run=source, reward=1.0)
    data = config(echo_env.pk, warmup={"source": "run", "run": source.pk}, grpo=None)
    response = api.post("/api/runs/", data, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["warnings"] == [DEPRECATIONS["warmup"]]
    run = Run.objects.get(pk=response.json()["id"])
    assert "warmup" not in run.config
    assert run.config["sft_warmup"]["source"] == "run" and run.config["sft_warmup"]["run"] == source.pk
    assert (run.phase, run.config["grpo"]) == ("warmup", None)
    event = RunEvent.objects.get(run=run, kind=LAUNCH_WARNING)
    assert (event.message, event.data) == (DEPRECATIONS["warmup"], {"field": "warmup"})
    # The same under the new name: no warning.
    data = config(echo_env.pk, sft_warmup={"source": "run", "run": source.pk}, grpo=None)
    response = api.post("/api/runs/", data, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["warnings"] == []


def test_errors_name_the_key_the_config_used(api, outsider_api, owner, echo_env, built_model):
    source = RunFactory(owner=owner, name="src", max_steps=1)
    RolloutFactory(run=source, reward=1.0)
    runs, events = Run.objects.count(), RunEvent.objects.count()

    def refused_here(client, data):
        response = client.post("/api/runs/", data, format="json")
        assert response.status_code == 400, response.json()
        assert (Run.objects.count(), RunEvent.objects.count()) == (runs, events)
        return response.json()

    assert refused_here(api, config(echo_env.pk, warmup={"source": "run"})) == {
        "warmup.run": ['source "run" needs the id of the run whose rollouts to keep']
    }
    assert refused_here(api, config(echo_env.pk, sft_warmup={"source": "run"})) == {
        "sft_warmup.run": ['source "run" needs the id of the run whose rollouts to keep']
    }
    # An outsider may not warm up on the owner's run (nor use the owner's environment).
    assert refused_here(outsider_api, config(echo_env.pk, warmup={"source": "run", "run": source.pk})) == {
        "environments.0.environment": [f"no environment with id {echo_env.pk}"],
        "warmup.run": [f"no run with id {source.pk}"],
    }
    both = config(echo_env.pk, warmup={"source": "solver"}, sft_warmup={"source": "solver"})
    assert refused_here(api, both) == {"warmup": ["`warmup` is the deprecated name of `sft_warmup`: give only `sft_warmup`"]}


def test_a_stored_config_with_the_old_key_still_loads(owner):
    stored = {**config(1, grpo=None), "warmup": {"kind": "sft", "source": "solver"}}
    loaded = RunConfig.model_validate(stored)
    assert loaded.sft_warmup is not None and loaded.sft_warmup.source == "solver"
    assert RunConfig.model_validate({**config(1), "warmup": None}).sft_warmup is None


def test_the_openapi_body_lists_the_allowlist_and_the_deprecated_key():
    from drf_spectacular.generators import SchemaGenerator

    schemas = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    grpo = schemas["GRPOSettings"]["properties"]
    assert set(TRL_PASSTHROUGH) <= set(grpo)
    assert grpo["top_p"]["anyOf"][0] == {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    run = schemas["RunConfig"]["properties"]
    assert run["warmup"]["deprecated"] is True and "sft_warmup" in run
