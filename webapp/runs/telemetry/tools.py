"""Reads for the run page's tool table: per tool, calls, failures, mean latency, the most
common error and the first transcript where the tool failed.

The counts are SQL sums of the per-tool metrics the worker logs each step
(envs/adapters/tool_metrics.py), so they are exact whatever the run's length. Error
messages are not metrics: they are read from the transcripts of a few steps only, found
through the metrics' (run, key, step, value) index, never by loading a run's rollouts:
  - a tool's first failing step (the first step whose `failure_total` is above zero): its
    earliest rollout with a failed result of that tool is the link to the first failure;
  - its latest failing step, so the most common message also reflects how the run ends.
The most common message is therefore that of the sampled steps (at most
MAX_SAMPLED_STEPS of them, MAX_ROLLOUTS_PER_STEP rollouts each), not of the whole run.
A failure TRL left out of the transcript (a result that would overrun
max_completion_length) shows in the counts but not in a message or a link.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.db import connection
from django.db.models import Sum

from envs.adapters.tool_metrics import (
    CALLS,
    ERROR_CLASSES,
    ERRORS_PREFIX,
    FAILURES,
    LATENCY,
    parse_tool_key,
    safe_tool_name,
    tool_key,
    tool_results,
)
from webapp.runs.models import MetricPoint, Rollout, Run
from webapp.runs.telemetry.series import run_metric_keys

MAX_TOOLS = 100
MAX_SAMPLED_STEPS = 8
MAX_ROLLOUTS_PER_STEP = 64
MAX_ERROR_CHARS = 500


def run_tool_table(*, run: Run) -> dict[str, Any]:
    """`{"tools": [row, ...], "errors": {error class: failed calls}}` for the whole run.

    A row: `name`, `calls`, `failures`, `failure_rate` (None before any call), `latency_s`
    (mean seconds per call, weighted by the calls of each step; None if never timed),
    `top_error` ("" when no sampled transcript shows one) and `top_error_count` (in the
    sampled steps), `first_failure_step` and `first_failure_seq` (the rollout; None when
    the tool never failed, or its first failing step's transcripts do not show it).
    Most failures first, then most calls, then by name; at most MAX_TOOLS rows.
    """
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    errors = dict.fromkeys(ERROR_CLASSES, 0)
    # The run's keys by a loose index scan, then sums by exact key: index seeks on every
    # database (a LIKE prefix is no index range under PostgreSQL's default collation).
    keys = [
        key
        for key in run_metric_keys(run=run)
        if key.startswith(ERRORS_PREFIX)
        or (parse_tool_key(key) or ("", ""))[1] in (CALLS, FAILURES)
    ]
    totals = (
        MetricPoint.objects.filter(run=run, key__in=keys)
        .values_list("key")
        .annotate(total=Sum("value"))
        if keys
        else []
    )
    for key, total in totals:
        if key.startswith(ERRORS_PREFIX):
            error = key[len(ERRORS_PREFIX) :]
            if error in errors:
                errors[error] = int(total or 0)
            continue
        parsed = parse_tool_key(key)
        if parsed is None:
            continue
        name, field = parsed
        if field == CALLS:
            calls[name] = int(total or 0)
        elif field == FAILURES:
            failures[name] = int(total or 0)
    names = sorted(set(calls) | set(failures), key=lambda n: (-failures[n], -calls[n], n))[
        :MAX_TOOLS
    ]
    latency = _mean_latencies(run_id=run.pk, names=names)
    first_steps = {n: _failing_step(run, n, first=True) for n in names if failures[n]}
    last_steps = {n: _failing_step(run, n, first=False) for n in first_steps}
    sampled = _sampled_rollouts(run, [*first_steps.values(), *last_steps.values()])
    rows = []
    for name in names:
        first_step = first_steps.get(name)
        first_seq, messages = None, Counter[str]()
        for step in dict.fromkeys((first_step, last_steps.get(name))):
            if step is None:  # a tool that never failed: no step was sampled for it
                continue
            for seq, failed in sampled.get(step, {}).get(name, []):
                if step == first_step and first_seq is None:
                    first_seq = seq
                messages[failed] += 1
        top = messages.most_common(1)
        rows.append(
            {
                "name": name,
                "calls": calls[name],
                "failures": failures[name],
                "failure_rate": failures[name] / calls[name] if calls[name] else None,
                "latency_s": latency.get(name),
                "top_error": top[0][0] if top else "",
                "top_error_count": top[0][1] if top else 0,
                "first_failure_step": first_step,
                "first_failure_seq": first_seq,
            }
        )
    return {"tools": rows, "errors": errors}


def _failing_step(run: Run, name: str, *, first: bool) -> int | None:
    rows = MetricPoint.objects.filter(run=run, key=tool_key(name, FAILURES), value__gt=0)
    return rows.order_by("step" if first else "-step").values_list("step", flat=True).first()


def _sampled_rollouts(
    run: Run, steps: list[int | None]
) -> dict[int, dict[str, list[tuple[int, str]]]]:
    """Per sampled step, per tool: `(rollout seq, error message)` of each failed result, in order."""
    wanted = [step for step in dict.fromkeys(steps) if step is not None][:MAX_SAMPLED_STEPS]
    found: dict[int, dict[str, list[tuple[int, str]]]] = {}
    for step in wanted:
        by_tool: dict[str, list[tuple[int, str]]] = {}
        rollouts = (
            Rollout.objects.filter(run=run, step=step)
            .order_by("seq")
            .values_list("seq", "messages")[:MAX_ROLLOUTS_PER_STEP]
        )
        for seq, transcript in rollouts:
            for result in tool_results(transcript):
                if result.error is not None:
                    by_tool.setdefault(safe_tool_name(result.name), []).append(
                        (seq, result.error[:MAX_ERROR_CHARS])
                    )
        found[step] = by_tool
    return found


def _mean_latencies(*, run_id: int, names: list[str]) -> dict[str, float]:
    """Per tool, its steps' mean latencies weighted by their calls: the mean seconds per
    call over the run. One query per tool, joining on the metrics' unique index."""
    quote = connection.ops.quote_name
    table, key, value = quote(MetricPoint._meta.db_table), quote("key"), quote("value")
    sql = (
        f"SELECT SUM(l.{value} * c.{value}), SUM(c.{value}) FROM {table} l"
        f" JOIN {table} c ON c.run_id = l.run_id AND c.step = l.step AND c.{key} = %s"
        f" WHERE l.run_id = %s AND l.{key} = %s AND l.{value} IS NOT NULL"
    )
    means = {}
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(sql, [tool_key(name, CALLS), run_id, tool_key(name, LATENCY)])
            weighted, total = cursor.fetchone()
            if weighted is not None and total:
                means[name] = float(weighted) / float(total)
    return means
