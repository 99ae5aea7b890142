"""The run's rollouts searched: by reward, a reward term, the tools their transcripts used
(the per-rollout summary written with the row), unscored or not, and transcript text, in
one of a few orderings. The run page's transcript list and the rollouts API read it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import BooleanField, F, FloatField, Func, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import compile_json_path  # type: ignore[attr-defined]  # Django's own helper (json.py), missing from django-stubs
from django.db.models.functions import Cast

from webapp.runs.models import Rollout, Run
from webapp.runs.selectors import run_rollouts


class JsonNumber(Func):
    """The number at `keys` in a JSON column; SQL NULL where there is none (the key is
    absent, or its value is JSON null: Django's key transforms give the text 'null' there
    on SQLite, which casts to 0)."""

    output_field = FloatField()

    def __init__(self, column: str, *keys: str) -> None:
        super().__init__(F(column))
        self.keys = list(keys)

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:  # type: ignore[override]
        column, params = compiler.compile(self.source_expressions[0])
        return f"JSON_EXTRACT({column}, %s)", [*params, compile_json_path(self.keys)]

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        column, params = compiler.compile(self.source_expressions[0])
        # ->> of JSON null is SQL NULL; the values stored there are numbers (record.py).
        return f"(({column} #>> %s)::double precision)", [*params, self.keys]


ROLLOUT_ORDERINGS = ("seq", "-seq", "reward", "-reward", "advantage", "-advantage")
# SQLite has no text index: `q` there looks through the run's newest SEARCH_SCAN_LIMIT rollouts.
SEARCH_SCAN_LIMIT = 5000
# The expression the GIN index of migration runs/0011 is built on, word for word.
ROLLOUT_TEXT_SEARCH = (
    "jsonb_to_tsvector('simple'::regconfig, messages, '[\"string\"]'::jsonb)"
    " @@ plainto_tsquery('simple'::regconfig, %s)"
)


@dataclass(frozen=True)
class RolloutSearch:
    """What the rollout list is filtered on; None (or "") leaves that filter out.

    `term`: the rollouts where that reward term has a value (at least `term_min` when given).
    `tool`: those whose transcript holds a result of that tool; `tool_failed` True: one of
    them failed (any tool's when `tool` is None), False: none did. `q`: words of the
    transcript's text (PostgreSQL full-text; on SQLite a substring of the newest rows')."""

    min_reward: float | None = None
    max_reward: float | None = None
    term: str | None = None
    term_min: float | None = None
    tool: str | None = None
    tool_failed: bool | None = None
    unscored: bool | None = None
    q: str | None = None


def run_rollout_search(
    *,
    run: Run,
    search: RolloutSearch,
    ordering: str = "seq",
    step: int | None = None,
    env: str | None = None,
    after_seq: int | None = None,
    before_seq: int | None = None,
) -> tuple[QuerySet[Rollout], dict[str, Any] | None]:
    """The run's rollouts that match, in `ordering` (ROLLOUT_ORDERINGS; by reward or
    advantage, rows without one come last and ties go by seq), and how `q` was searched:
    None without `q`, {"mode": "fulltext"} on PostgreSQL, {"mode": "scan", "scanned": n,
    "limit": SEARCH_SCAN_LIMIT} elsewhere (only the newest `limit` rollouts were looked at)."""
    rows = run_rollouts(run=run, step=step, env=env, after_seq=after_seq, before_seq=before_seq)
    if search.min_reward is not None:
        rows = rows.filter(reward__gte=search.min_reward)
    if search.max_reward is not None:
        rows = rows.filter(reward__lte=search.max_reward)
    if search.term:
        rows = rows.alias(term_value=JsonNumber("rewards", search.term)).filter(term_value__isnull=False)
        if search.term_min is not None:
            rows = rows.filter(term_value__gte=search.term_min)
    if search.tool:
        rows = rows.filter(tools__has_key=search.tool)
        if search.tool_failed is not None:
            failures = JsonNumber("tools", search.tool, "failures")
            rows = rows.alias(named_failures=failures)
            rows = rows.filter(named_failures__gt=0) if search.tool_failed else rows.filter(named_failures=0)
    elif search.tool_failed is not None:
        rows = rows.filter(tool_failures__gt=0) if search.tool_failed else rows.filter(tool_failures=0)
    if search.unscored is not None:
        rows = rows.filter(unscored=search.unscored)
    found: dict[str, Any] | None = None
    if search.q:
        if connection.vendor == "postgresql":
            rows = rows.filter(RawSQL(ROLLOUT_TEXT_SEARCH, [search.q], output_field=BooleanField()))
            found = {"mode": "fulltext"}
        else:
            window = Rollout.objects.filter(run=run).order_by("-seq").values_list("seq", flat=True)
            lowest = window[SEARCH_SCAN_LIMIT - 1 : SEARCH_SCAN_LIMIT].first()
            if lowest is not None:
                rows = rows.filter(seq__gte=lowest)
            scanned = SEARCH_SCAN_LIMIT if lowest is not None else Rollout.objects.filter(run=run).count()
            # The JSON text as stored: the needle escaped the way json.dumps escaped it.
            needle = json.dumps(search.q)[1:-1]
            rows = rows.alias(messages_text=Cast("messages", TextField())).filter(messages_text__icontains=needle)
            found = {"mode": "scan", "scanned": scanned, "limit": SEARCH_SCAN_LIMIT}
    field = ordering.lstrip("-")
    descending = ordering.startswith("-")
    if field == "seq":
        rows = rows.order_by("-seq" if descending else "seq")
    else:
        value = F(field).desc(nulls_last=True) if descending else F(field).asc(nulls_last=True)
        rows = rows.order_by(value, "-seq" if descending else "seq")
    return rows, found
