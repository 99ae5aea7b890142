"""PATCH and DELETE /api/runs/<id>/: the owner edits a run's name, tags, group and notes, and
deletes a finished run with its rows and folder; a viewer (runs.view_run) is refused, an
outsider does not see the run; a refused request changes nothing."""

from __future__ import annotations

import pytest

from tests.factories import EvaluationFactory, RolloutFactory, RunFactory
from tests.fixtures.accounts import grant, token_client
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent, RunTag

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer_api(django_user_model):
    """A teammate who may see every run (runs.view_run) but changes none."""
    return token_client(grant(django_user_model.objects.create_user("viewer"), "runs.view_run"))


def _tags(run):
    return list(RunTag.objects.filter(run=run).order_by("slug").values_list("slug", flat=True))


def test_owner_edits_name_tags_group_and_notes(api, owner):
    run = RunFactory(owner=owner, name="old", status=Run.Status.RUNNING)
    RunTag.objects.create(run=run, slug="stale")

    response = api.patch(
        f"/api/runs/{run.pk}/",
        {"name": "  lr 1e-5  ", "tags": ["lr-sweep", "seed_0", "lr-sweep"], "group": "catch lr", "notes": "<b>x</b>"},
        format="json",
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["name"], body["tags"], body["group"], body["notes"]) == (
        "lr 1e-5", ["lr-sweep", "seed_0"], "catch lr", "<b>x</b>"
    )
    run.refresh_from_db()
    assert (run.name, run.group, run.notes, run.status) == ("lr 1e-5", "catch lr", "<b>x</b>", "running")
    assert _tags(run) == ["lr-sweep", "seed_0"]


def test_a_partial_edit_leaves_the_other_fields(api, owner):
    run = RunFactory(owner=owner, name="keep", group="g", notes="n")
    RunTag.objects.create(run=run, slug="a")

    response = api.patch(f"/api/runs/{run.pk}/", {"notes": ""}, format="json")

    assert response.status_code == 200
    run.refresh_from_db()
    assert (run.name, run.group, run.notes, _tags(run)) == ("keep", "g", "", ["a"])


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        # A valid name beside a refused tag: neither is written.
        ({"name": "new", "tags": ["ok", "Not A Slug"]}, {"tags": [
            "tag 1 ('Not A Slug') is not a slug: lowercase letters, digits, '-' and '_', starting and ending "
            "with a letter or digit, at most 40 characters"
        ]}),
        ({"tags": [f"t{i}" for i in range(21)]}, {"tags": ["at most 20 tags on a run (this asks for 21)"]}),
        ({"tags": "a,b"}, {"tags": ['a list of tags, e.g. ["baseline", "lr-sweep"]']}),
        ({"name": "   "}, {"name": ["name cannot be blank"]}),
        ({"name": "x" * 121}, {"name": ["at most 120 characters (this one has 121)"]}),
        ({"group": "a\nb"}, {"group": ["one line of text, without control characters"]}),
        ({"notes": "n" * 10_001}, {"notes": ["at most 10000 characters (these have 10001)"]}),
        ({"status": "succeeded", "name": "new"}, {
            "non_field_errors": ["only name, tags, group, notes can be edited; not status"]
        }),
        ([1], {"non_field_errors": ['the body must be a JSON object with any of "name", "tags", "group", "notes"']}),
    ],
)
def test_a_refused_edit_names_the_field_and_writes_nothing(api, owner, body, errors):
    run = RunFactory(owner=owner, name="keep", group="g", notes="n")
    RunTag.objects.create(run=run, slug="a")

    response = api.patch(f"/api/runs/{run.pk}/", body, format="json")

    assert response.status_code == 400
    assert response.json() == errors
    run.refresh_from_db()
    assert (run.name, run.group, run.notes, run.status, _tags(run)) == ("keep", "g", "n", "queued", ["a"])


def test_only_the_owner_edits(owner, outsider_api, viewer_api, operator_api):
    run = RunFactory(owner=owner, name="keep")

    outsider = outsider_api.patch(f"/api/runs/{run.pk}/", {"name": "x"}, format="json")
    viewer = viewer_api.patch(f"/api/runs/{run.pk}/", {"name": "x"}, format="json")
    operator = operator_api.patch(f"/api/runs/{run.pk}/", {"name": "x"}, format="json")

    assert outsider.status_code == 404
    assert (viewer.status_code, operator.status_code) == (403, 403)
    assert viewer.json() == {"detail": "only the run's owner may edit or delete it"}
    run.refresh_from_db()
    assert run.name == "keep"


def _recorded_run(owner, status, runs_dir):
    run = RunFactory(owner=owner, status=status)
    MetricPoint.objects.create(run=run, step=1, key="reward", value=0.5, seq=1)
    RolloutFactory(run=run)
    RunEvent.objects.create(run=run, kind="claimed")
    RunTag.objects.create(run=run, slug="a")
    folder = runs_dir / str(run.pk) / "checkpoint-1"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    return run


def test_owner_deletes_a_finished_run_with_its_rows_and_folder(api, owner, settings, tmp_path):
    settings.RUNS_DIR = tmp_path
    run = _recorded_run(owner, Run.Status.SUCCEEDED, tmp_path)
    other = _recorded_run(owner, Run.Status.FAILED, tmp_path)

    response = api.delete(f"/api/runs/{run.pk}/")

    assert response.status_code == 204
    assert list(Run.objects.values_list("pk", flat=True)) == [other.pk]
    assert [
        list(model.objects.values_list("run_id", flat=True).distinct())
        for model in (MetricPoint, Rollout, RunEvent, RunTag)
    ] == [[other.pk]] * 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [str(other.pk)]
    assert api.get(f"/api/runs/{run.pk}/").status_code == 404


@pytest.mark.parametrize("status", [Run.Status.QUEUED, Run.Status.RUNNING])
def test_an_active_run_is_not_deleted(api, owner, settings, tmp_path, status):
    settings.RUNS_DIR = tmp_path
    run = _recorded_run(owner, status, tmp_path)

    response = api.delete(f"/api/runs/{run.pk}/")

    assert response.status_code == 409
    assert response.json() == {"detail": f"a {status} run cannot be deleted: cancel it, or wait until it ends"}
    assert [model.objects.filter(run=run).count() for model in (MetricPoint, Rollout, RunEvent, RunTag)] == [1] * 4
    assert Run.objects.get(pk=run.pk).status == status
    assert (tmp_path / str(run.pk) / "checkpoint-1" / "model.safetensors").read_bytes() == b"weights"


def test_a_run_another_active_run_trains_from_is_not_deleted(api, owner, settings, tmp_path):
    settings.RUNS_DIR = tmp_path
    run = _recorded_run(owner, Run.Status.SUCCEEDED, tmp_path)
    child = RunFactory(owner=owner, status=Run.Status.RUNNING, model=f"run:{run.pk}@1")

    response = api.delete(f"/api/runs/{run.pk}/")

    assert response.status_code == 409
    assert response.json() == {
        "detail": f"run {child.pk} trains from a checkpoint of this run: delete it when that run has ended"
    }
    assert Run.objects.filter(pk=run.pk).exists()
    assert (tmp_path / str(run.pk) / "checkpoint-1").is_dir()


def test_only_the_owner_deletes(owner, outsider_api, viewer_api, operator_api, settings, tmp_path):
    settings.RUNS_DIR = tmp_path
    run = _recorded_run(owner, Run.Status.SUCCEEDED, tmp_path)

    codes = [c.delete(f"/api/runs/{run.pk}/").status_code for c in (outsider_api, viewer_api, operator_api)]

    assert codes == [404, 403, 403]
    assert Run.objects.filter(pk=run.pk).count() == 1
    assert [model.objects.filter(run=run).count() for model in (MetricPoint, Rollout, RunEvent, RunTag)] == [1] * 4
    assert (tmp_path / str(run.pk) / "checkpoint-1").is_dir()


def test_a_run_whose_checkpoints_an_active_evaluation_plays_is_not_deleted(api, owner, settings, tmp_path):
    from webapp.evaluations.models import Evaluation

    settings.RUNS_DIR = tmp_path
    run = _recorded_run(owner, Run.Status.SUCCEEDED, tmp_path)
    evaluation = EvaluationFactory(owner=owner, source_run=run, status=Evaluation.Status.QUEUED)

    refused = api.delete(f"/api/runs/{run.pk}/")
    Evaluation.objects.filter(pk=evaluation.pk).update(status=Evaluation.Status.SUCCEEDED)
    accepted = api.delete(f"/api/runs/{run.pk}/")

    assert refused.status_code == 409
    assert refused.json() == {
        "detail": f"evaluation {evaluation.pk} plays this run's checkpoints: delete it when that evaluation has ended"
    }
    assert accepted.status_code == 204
    assert not Run.objects.filter(pk=run.pk).exists()
    assert list(tmp_path.iterdir()) == []
    evaluation.refresh_from_db()
    assert evaluation.source_run_id is None  # the evaluation stays, its results with it
