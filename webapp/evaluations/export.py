"""An evaluation's episodes as JSONL or Parquet, streamed (the shared writers are
webapp/runs/telemetry/export.py's): one row per episode with its model, seed, transcript, reward,
attributes and tool-call spans."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.db.models import Q

from webapp.evaluations.models import EvaluationEpisode
from webapp.runs.telemetry import export as run_export
from webapp.runs.telemetry.export import flat_messages, rows_parquet, tool_call_spans

EPISODE_FIELDS = (
    "model_index", "model", "index", "seed", "messages", "reward", "won", "tool_calls", "tool_failures", "lost",
    "attributes",
)


def _episode_pages(evaluation: Any) -> Iterator[list[dict[str, Any]]]:
    after: tuple[int, int] = (-1, -1)
    while True:
        model_index, index = after
        page = list(
            EvaluationEpisode.objects.filter(evaluation=evaluation)
            .filter(models_after(model_index, index))
            .order_by("model_index", "index")
            .values(*EPISODE_FIELDS)[: run_export.PAGE_ROWS]
        )
        if not page:
            return
        yield page
        after = (page[-1]["model_index"], page[-1]["index"])


def models_after(model_index: int, index: int) -> Any:
    return Q(model_index__gt=model_index) | Q(model_index=model_index, index__gt=index)


def episode_row(evaluation: Any, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "evaluation": evaluation.pk,
        # The entry's name now, or the one it played under once its row was deleted (SET_NULL).
        "env": evaluation.environment.name if evaluation.environment is not None else evaluation.environment_name,
        "model": row["model"],
        "model_index": row["model_index"],
        "index": row["index"],
        "seed": row["seed"],
        "messages": row["messages"],
        "reward": row["reward"],
        "won": row["won"],
        "tool_call_count": row["tool_calls"],
        "tool_failures": row["tool_failures"],
        "lost": row["lost"],
        "attributes": row["attributes"] if isinstance(row["attributes"], dict) else {},
        "tool_calls": tool_call_spans(row["messages"]),
    }


def episodes_jsonl(evaluation: Any) -> Iterator[bytes]:
    for page in _episode_pages(evaluation):
        yield b"".join(
            json.dumps(episode_row(evaluation, row), ensure_ascii=False, default=str).encode() + b"\n"
            for row in page
        )


def _episode_schema() -> Any:
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("name", pa.string()),
                         ("tool_calls", pa.string())])
    span = pa.struct([("turn", pa.int32()), ("name", pa.string()), ("arguments", pa.string()),
                      ("result", pa.string())])
    return pa.schema([
        ("evaluation", pa.int64()), ("env", pa.string()), ("model", pa.string()), ("model_index", pa.int32()),
        ("index", pa.int32()), ("seed", pa.int64()), ("messages", pa.list_(message)), ("reward", pa.float64()),
        ("won", pa.bool_()), ("tool_call_count", pa.int32()), ("tool_failures", pa.int32()), ("lost", pa.bool_()),
        # Attribute names differ by environment: JSON text keeps one schema for every file.
        ("attributes", pa.string()), ("tool_calls", pa.list_(span)),
    ])


def episodes_parquet(evaluation: Any) -> Iterator[bytes]:
    def pages() -> Iterator[list[dict[str, Any]]]:
        for page in _episode_pages(evaluation):
            rows = [episode_row(evaluation, row) for row in page]
            for item in rows:
                item["messages"] = flat_messages(item["messages"])
                item["attributes"] = json.dumps(item["attributes"], sort_keys=True)
            yield rows

    return rows_parquet(_episode_schema(), pages())
