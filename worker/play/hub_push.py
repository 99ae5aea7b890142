"""The "Push to the Hub" job (webapp/workbench/hub_push.py): a run's rollouts or an evaluation's
episodes written as the same Parquet the export endpoints stream, then uploaded with the job
owner's `hf_token` to the dataset repository they named, beside a dataset card. The file is
written to a temporary folder first (a run's rollouts need not fit in memory) and counted
from its own metadata, so the card and the job's result say how many rows were pushed."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings

from webapp.accounts.secrets import user_secret_value
from webapp.catalog.models import Environment
from webapp.evaluations.export import episodes_parquet
from webapp.evaluations.models import Evaluation
from webapp.jobs.models import Job
from webapp.runs.models import Run
from webapp.runs.telemetry.export import rollouts_parquet
from worker.play.jobs import job_progress

DATA_PATH = "data/train-00000-of-00001.parquet"


def _json_block(value: Any) -> str:
    return "```json\n" + json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n```\n"


def _environments(ids: list[Any]) -> list[dict[str, Any]]:
    """Names and kinds only: a server's address may be private to its owner."""
    entries = Environment.objects.in_bulk([i for i in ids if isinstance(i, int)])
    return [{"id": i, "name": entries[i].name, "kind": entries[i].kind} for i in ids if i in entries]


def _run_card(run: Run, rows: int) -> tuple[str, str]:
    config = run.config or {}
    environments = _environments([e.get("environment") for e in config.get("environments") or [] if isinstance(e, dict)])
    body = (
        f"# {run.name}\n\n"
        f"{rows} rollouts of envlab run {run.pk} ({run.status}, {run.step} steps, model `{run.model}`), one row per "
        "episode: the prompt, the full multi-turn transcript with its tool calls, each reward term, the reward "
        "and the GRPO advantage.\n\n"
        "## Reward recipe\n\n" + _json_block(config.get("rewards")) +
        "\n## Environments\n\n" + _json_block(environments) +
        "\n## Run config\n\n" + _json_block(config)
    )
    return "rollouts", body


def _evaluation_card(evaluation: Evaluation, rows: int) -> tuple[str, str]:
    models = [spec.get("label") for spec in evaluation.model_specs or [] if isinstance(spec, dict)]
    environments = _environments([evaluation.environment_id])
    body = (
        f"# Evaluation {evaluation.pk} on {evaluation.environment_name}\n\n"
        f"{rows} episodes of envlab evaluation {evaluation.pk} ({evaluation.status}): the same seeded episodes "
        "played by each model, one row per episode with its transcript, reward and outcome.\n\n"
        "## Models\n\n" + _json_block(models) +
        "\n## Environment\n\n" + _json_block(environments or [{"name": evaluation.environment_name}]) +
        "\n## Settings\n\n" + _json_block({"episodes": evaluation.episodes, "seed": evaluation.seed,
                                             "prompt": evaluation.prompt, **(evaluation.settings or {})})
    )
    return "episodes", body


def _card(kind: str, body: str) -> bytes:
    header = (
        "---\n"
        "configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/*.parquet\n"
        f"tags:\n- envlab\n- reinforcement-learning\n- {kind}\n"
        "---\n\n"
    )
    return (header + body).encode()


def _write(chunks: Iterator[bytes], path: Path) -> int:
    import pyarrow.parquet as pq

    with open(path, "wb") as out:
        for chunk in chunks:
            out.write(chunk)
    return int(pq.read_metadata(path).num_rows)


def hub_push(job: Job, lease_owner: str) -> dict[str, Any]:
    from huggingface_hub import CommitOperationAdd, HfApi, constants

    params = job.params
    if constants.is_offline_mode():
        raise ValueError(
            "this worker runs with HF_HUB_OFFLINE=1 (`make run` sets it for the offline demo), so the Hub "
            "cannot be reached: run the worker with HF_HUB_OFFLINE=0 to push"
        )
    token = user_secret_value(user=job.owner, name="hf_token")
    if not token:
        raise ValueError("no Hugging Face token is stored for this account any more: store it and push again")
    with tempfile.TemporaryDirectory(prefix="envlab-push-") as folder:
        path = Path(folder) / "data.parquet"
        if params["what"] == "run":
            run = Run.objects.get(pk=params["id"])
            rows = _write(rollouts_parquet(run), path)
            kind, body = _run_card(run, rows)
        else:
            evaluation = Evaluation.objects.get(pk=params["id"])
            rows = _write(episodes_parquet(evaluation), path)
            kind, body = _evaluation_card(evaluation, rows)
        job_progress(job, lease_owner, 1)
        api = HfApi(endpoint=settings.ENVLAB_HF_ENDPOINT, token=token)
        repo = api.create_repo(params["repo_id"], repo_type="dataset", private=params["private"], exist_ok=True)
        job_progress(job, lease_owner, 2)
        commit = api.create_commit(
            params["repo_id"], repo_type="dataset",
            operations=[CommitOperationAdd(DATA_PATH, str(path)), CommitOperationAdd("README.md", _card(kind, body))],
            commit_message=f"envlab: {rows} {kind} of {params['name']}"[:200],
        )
        job_progress(job, lease_owner, 3)
        return {
            "repo_id": params["repo_id"], "url": str(repo), "rows": rows, "bytes": path.stat().st_size,
            "path": DATA_PATH, "commit": commit.oid,
        }
