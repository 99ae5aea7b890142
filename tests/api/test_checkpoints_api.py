"""Checkpoints a run lists, and runs that start from one: `model: {"run": id, "checkpoint": step | "last"}`.

Checkpoint folders are made by hand here (the layout transformers' Trainer writes: a
`trainer_state.json` and a `config.json`); tests/e2e/test_training.py trains from a real one."""

from __future__ import annotations

import json
import os

import pytest

from tests.factories import RunFactory
from tests.support.checkpoints import checkpoint_folder
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import run_launch

from .test_run_limits import config, echo_env, models_dir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


def _checkpoint(settings, run: Run, step: int, *, size: int = 10, mtime: int = 1_700_000_000) -> None:
    folder = settings.RUNS_DIR / str(run.pk) / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "trainer_state.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"x" * size)
    os.utime(folder / "trainer_state.json", (mtime + step, mtime + step))


def _warmup(settings, run: Run) -> None:
    folder = settings.RUNS_DIR / str(run.pk) / "warmup" / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    os.utime(folder / "config.json", (1_700_000_000, 1_700_000_000))


@pytest.fixture
def trained(owner, settings, models_dir):  # noqa: F811
    run = RunFactory(
        owner=owner, name="trained", max_steps=10, status="succeeded", checkpoint_step=10,
    )
    _warmup(settings, run)
    _checkpoint(settings, run, 5, size=100)
    _checkpoint(settings, run, 10, size=200)
    _checkpoint(settings, run, 15)  # newer than the recorded step: a discarded timeline
    (settings.RUNS_DIR / str(run.pk) / "checkpoint-7").mkdir()  # half-written: no trainer_state.json
    return run


def test_the_run_detail_lists_its_usable_checkpoints_by_step(api, trained):
    response = api.get(f"/api/runs/{trained.pk}/")
    assert response.status_code == 200
    assert response.json()["checkpoints"] == [
        {"step": 0, "phase": "warmup", "created_at": "2023-11-14T22:13:20Z", "size_bytes": 2, "adapter": False},
        {"step": 5, "phase": "grpo", "created_at": "2023-11-14T22:13:25Z", "size_bytes": 104, "adapter": False},
        {"step": 10, "phase": "grpo", "created_at": "2023-11-14T22:13:30Z", "size_bytes": 204, "adapter": False},
    ]
    assert "checkpoints" not in api.get("/api/runs/").json()[0]  # lists do not read the disk


def test_a_run_without_checkpoints_lists_none(api, owner, models_dir):  # noqa: F811
    run = RunFactory(owner=owner, name="new")
    assert api.get(f"/api/runs/{run.pk}/").json()["checkpoints"] == []


@pytest.mark.parametrize(("checkpoint", "step"), [("last", 10), (5, 5), (0, 0)])
def test_a_run_starts_from_a_checkpoint_pinned_at_launch(
    api, trained, echo_env, broker, django_capture_on_commit_callbacks, checkpoint, step  # noqa: F811
):
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/runs/", config(echo_env.pk, model={"run": trained.pk, "checkpoint": checkpoint}), format="json"
        )
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    # "last" is pinned to the step it named at launch: a resume trains from the same weights.
    assert run.config["model"] == {"run": trained.pk, "checkpoint": step}
    assert run.model == f"run:{trained.pk}@{step}"
    assert [json.loads(m)["headers"]["argsrepr"] for m in broker.lrange("train", 0, -1)] == [f"({run.pk},)"]


def test_the_default_checkpoint_is_the_last(api, trained, echo_env, broker):  # noqa: F811
    response = api.post("/api/runs/", config(echo_env.pk, model={"run": trained.pk}), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["config"]["model"] == {"run": trained.pk, "checkpoint": 10}


def _refused(api, data) -> dict:
    before = set(Run.objects.values_list("pk", flat=True))
    events = RunEvent.objects.count()
    response = api.post("/api/runs/", data, format="json")
    assert response.status_code == 400, response.json()
    assert set(Run.objects.values_list("pk", flat=True)) == before
    assert RunEvent.objects.count() == events
    return response.json()


def test_a_missing_step_names_the_steps_there_are(api, trained, echo_env):  # noqa: F811
    for step in (7, 15, 3):
        errors = _refused(api, config(echo_env.pk, model={"run": trained.pk, "checkpoint": step}))
        assert errors == {"model": [f"run {trained.pk} has no checkpoint at step {step}; it has 0, 5, 10"]}


def test_a_run_with_no_checkpoint_cannot_be_started_from(api, owner, echo_env, models_dir):  # noqa: F811
    empty = RunFactory(owner=owner, name="empty")
    errors = _refused(api, config(echo_env.pk, model={"run": empty.pk}))
    assert errors == {"model": [f"run {empty.pk} has no checkpoint yet"]}


def test_another_users_run_is_not_found(api, outsider, echo_env, settings, models_dir):  # noqa: F811
    theirs = RunFactory(owner=outsider, name="theirs", checkpoint_step=2)
    _checkpoint(settings, theirs, 2)
    missing = _refused(api, config(echo_env.pk, model={"run": 999_999}))
    hidden = _refused(api, config(echo_env.pk, model={"run": theirs.pk, "checkpoint": 2}))
    assert missing == {"model": ["no run with id 999999"]}
    assert hidden == {"model": [f"no run with id {theirs.pk}"]}


@pytest.mark.parametrize(
    ("model", "errors"),
    [
        ({"run": 0}, {"model.run": ["Input should be greater than or equal to 1"]}),
        ({"run": 1, "checkpoint": -1}, {"model.checkpoint": ['a checkpoint is a step (0 or more; 0 is the warm-up\'s model) or "last"']}),
        ({"run": 1, "checkpoint": "first"}, {"model.checkpoint": ['a checkpoint is a step (0 or more; 0 is the warm-up\'s model) or "last"']}),
        ({"run": 1, "checkpoint": True}, {"model.checkpoint": ['a checkpoint is a step (0 or more; 0 is the warm-up\'s model) or "last"']}),
        ({"run": 1, "path": "/etc"}, {"model.path": ["Extra inputs are not permitted"]}),
        (5, {"model": ["Input should be a valid string"]}),
    ],
)
def test_malformed_references_are_refused_per_field(api, echo_env, models_dir, model, errors):  # noqa: F811
    assert _refused(api, config(echo_env.pk, model=model)) == errors


def test_the_checkpoint_folder_is_still_refused_as_a_path(api, trained, echo_env, settings, models_dir):  # noqa: F811
    """A reference reaches a checkpoint through its run; its folder named as a path does not."""
    settings.ENVLAB_MODEL_ROOTS = [str(settings.RUNS_DIR.parent)]
    errors = _refused(api, config(echo_env.pk, model=str(settings.RUNS_DIR / str(trained.pk) / "checkpoint-10")))
    assert errors == {"model": [f"local model folders must be under {models_dir}, {settings.RUNS_DIR.parent}"]}


def test_a_checkpoint_gone_between_check_and_launch_is_refused(owner, trained, echo_env, monkeypatch):  # noqa: F811
    from webapp.runs import services
    from webapp.runs.checkpoints import ModelRefError

    def gone(**_):
        raise ModelRefError(f"run {trained.pk} has no checkpoint yet")

    monkeypatch.setattr(services, "model_pinned", gone)
    with pytest.raises(services.RunConfigError) as caught:
        run_launch(owner=owner, data=config(echo_env.pk, model={"run": trained.pk}))
    assert caught.value.errors == {"model": [f"run {trained.pk} has no checkpoint yet"]}
    assert list(Run.objects.values_list("name", flat=True)) == ["trained"]


def test_only_whole_checkpoints_are_listed_and_taken_as_a_model(api, owner, echo_env, settings, models_dir):  # noqa: F811
    """What a kill during a save leaves (webapp/runs/checkpoints.py): the staging folder of the
    save it cut short, and a folder of the layout before markers whose trainer state it cut
    short. Neither is listed, nor pinned as "last", nor taken by its step."""
    run = RunFactory(
        owner=owner, name="killed", max_steps=20, status="interrupted", checkpoint_step=12,
    )
    base = settings.RUNS_DIR / str(run.pk)
    _checkpoint(settings, run, 4)  # before markers, whole: still counts
    checkpoint_folder(base / "checkpoint-8", {"envlab-complete.json": '{"step": 8, "files": {"config.json": 2}}'})
    checkpoint_folder(base / "checkpoint-12", {"trainer_state.json": '{"global_step": 12, "log_hist'})
    checkpoint_folder(base / ".saving-checkpoint-12" / "checkpoint-12", {"envlab-complete.json": '{"step": 12}'})

    assert [c["step"] for c in api.get(f"/api/runs/{run.pk}/").json()["checkpoints"]] == [4, 8]
    response = api.post("/api/runs/", config(echo_env.pk, model={"run": run.pk}), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["config"]["model"] == {"run": run.pk, "checkpoint": 8}
    errors = _refused(api, config(echo_env.pk, model={"run": run.pk, "checkpoint": 12}))
    assert errors == {"model": [f"run {run.pk} has no checkpoint at step 12; it has 4, 8"]}


@pytest.fixture
def lora_trained(owner, settings, models_dir):  # noqa: F811
    """A LoRA run with a warm-up: its checkpoint 0 and its GRPO checkpoint are adapters alone."""
    run = RunFactory(owner=owner, name="lora", max_steps=4, status="succeeded", checkpoint_step=4)
    warmup = settings.RUNS_DIR / str(run.pk) / "warmup" / "model"
    grpo = settings.RUNS_DIR / str(run.pk) / "checkpoint-4"
    for folder in (warmup, grpo):
        folder.mkdir(parents=True)
        (folder / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": 8, "peft_type": "LORA"}))
        (folder / "adapter_model.safetensors").write_bytes(b"x" * 30)
    (grpo / "trainer_state.json").write_text("{}")
    return run


def test_a_lora_warm_up_is_listed_as_an_adapter_checkpoint_0(api, lora_trained):
    listed = api.get(f"/api/runs/{lora_trained.pk}/").json()["checkpoints"]
    assert [(c["step"], c["phase"], c["adapter"]) for c in listed] == [(0, "warmup", True), (4, "grpo", True)]


@pytest.mark.parametrize("checkpoint", [0, 4])
def test_a_lora_run_from_a_lora_checkpoint_must_continue_its_adapter(
    api, lora_trained, echo_env, broker, checkpoint  # noqa: F811
):
    model = {"run": lora_trained.pk, "checkpoint": checkpoint}
    errors = _refused(api, {**config(echo_env.pk, model=model), "peft": {"r": 8, "lora_alpha": 8}})
    assert list(errors) == ["peft"]
    assert "is a LoRA adapter with r=4, lora_alpha=8" in errors["peft"][0]
    # The same shape continues it; no `peft` trains every weight of the merged model.
    for peft in ({"peft": {"r": 4, "lora_alpha": 8}}, {}):
        response = api.post("/api/runs/", {**config(echo_env.pk, model=model), **peft}, format="json")
        assert response.status_code == 201, response.json()
