"""A run's rollouts as JSONL or Parquet, one row per episode, streamed: rows are read in keyset
pages and written as they come, so a 100k-rollout run never sits in memory whole.

Columns: run, seq, step, env, seed (the row's; None for rollouts stored before seeds were
kept), prompt_key (the same for one training prompt at every step), prompt and
messages (chat messages; a message's `tool_calls` and non-text `content` as JSON text in
Parquet, so every row has one schema), rewards (per term, null where a term did not apply),
reward, advantage, unscored, and tool_calls: the spans of the transcript where the model
called a tool (assistant turn index, tool name, arguments as JSON, the tool's answer).
Parquet loads with `datasets.load_dataset("parquet", data_files=...)`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from webapp.core.export import FORMATS, rows_parquet, streamed
from webapp.runs.models import Rollout, Run

__all__ = ["FORMATS", "rows_parquet", "streamed"]  # used by the run and evaluation exports

PAGE_ROWS = 500
FIELDS = ("seq", "step", "env", "seed", "prompt_key", "prompt", "messages", "rewards", "reward", "advantage", "unscored")


def _rollout_pages(run: Run) -> Iterator[list[dict[str, Any]]]:
    after = -1
    while True:
        page = list(
            Rollout.objects.filter(run=run, seq__gt=after).order_by("seq").values(*FIELDS)[:PAGE_ROWS]
        )
        if not page:
            return
        yield page
        after = page[-1]["seq"]


def term_names(run: Run) -> list[str]:
    """Every reward term of the run's config, containers' children included, in order."""
    rewards = (run.config or {}).get("rewards")
    if isinstance(rewards, dict):  # a recipe, resolved at launch
        rewards = rewards.get("terms")
    names: list[str] = []
    stack = list(reversed(rewards if isinstance(rewards, list) else []))
    while stack:
        term = stack.pop()
        if isinstance(term, dict) and isinstance(term.get("name"), str):
            names.append(term["name"])
            stack.extend(reversed(term.get("terms") or []))
    return names


def tool_call_spans(messages: Any) -> list[dict[str, Any]]:
    """The model's tool calls in a transcript, each with the answer that followed it."""
    spans: list[dict[str, Any]] = []
    if not isinstance(messages, list):
        return spans
    pending: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            pending = []
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    span = {
                        "turn": index,
                        "name": str(function.get("name", "")),
                        "arguments": json.dumps(function.get("arguments"), ensure_ascii=False, default=str),
                        "result": None,
                    }
                    spans.append(span)
                    pending.append(span)
        elif message.get("role") == "tool" and pending:
            pending.pop(0)["result"] = _text(message.get("content"))
    return spans


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def export_row(run: Run, row: dict[str, Any], terms: list[str]) -> dict[str, Any]:
    rewards = row["rewards"] if isinstance(row["rewards"], dict) else {}
    return {
        "run": run.pk,
        "seq": row["seq"],
        "step": row["step"],
        "env": row["env"],
        "seed": row["seed"],
        "prompt_key": row["prompt_key"],
        "prompt": row["prompt"],
        "messages": row["messages"],
        "rewards": {name: _float(rewards.get(name)) for name in terms},
        "reward": row["reward"],
        "advantage": row["advantage"],
        "unscored": row["unscored"],
        "tool_calls": tool_call_spans(row["messages"]),
    }


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def rollouts_jsonl(run: Run) -> Iterator[bytes]:
    terms = term_names(run)
    for page in _rollout_pages(run):
        yield b"".join(
            json.dumps(export_row(run, row, terms), ensure_ascii=False, default=str).encode() + b"\n" for row in page
        )


# --- Parquet -------------------------------------------------------------------------------------


def flat_messages(messages: Any) -> list[dict[str, Any]]:
    out = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        calls = message.get("tool_calls")
        out.append({
            "role": str(message.get("role", "")),
            "content": _text(message.get("content")),
            "name": _text(message.get("name")),
            "tool_calls": json.dumps(calls, ensure_ascii=False, default=str) if calls else None,
        })
    return out


def _schema(terms: list[str]) -> Any:
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("name", pa.string()),
                         ("tool_calls", pa.string())])
    span = pa.struct([("turn", pa.int32()), ("name", pa.string()), ("arguments", pa.string()),
                      ("result", pa.string())])
    fields = [
        ("run", pa.int64()), ("seq", pa.int64()), ("step", pa.int64()), ("env", pa.string()),
        ("seed", pa.int64()), ("prompt_key", pa.string()), ("prompt", pa.list_(message)), ("messages", pa.list_(message)),
        ("reward", pa.float64()), ("advantage", pa.float64()), ("unscored", pa.bool_()),
        ("tool_calls", pa.list_(span)),
    ]
    if terms:  # Parquet has no empty struct: a config without terms has no rewards column
        fields.insert(8, ("rewards", pa.struct([(name, pa.float64()) for name in terms])))
    return pa.schema(fields)


def rollouts_parquet(run: Run) -> Iterator[bytes]:
    terms = term_names(run)

    def pages() -> Iterator[list[dict[str, Any]]]:
        for page in _rollout_pages(run):
            rows = [export_row(run, row, terms) for row in page]
            for item in rows:
                item["prompt"] = flat_messages(item["prompt"])
                item["messages"] = flat_messages(item["messages"])
            yield rows

    return rows_parquet(_schema(terms), pages())
