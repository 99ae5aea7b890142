"""Metric tiers: each key's lowest and highest point per aligned block of steps, kept so that
a downsampled series of a long run reads about max_points rows per key, not every point.

A tier row covers the steps [start, start + width) of one key, `width` being BASE * 2**j
and `start` a multiple of it; a block without points has no row. Rows are made only for
complete blocks: the steps below the key's mark, a multiple of BASE at or below the key's
newest step. A read takes the blocks at or above the mark from the points themselves.

Rows are kept up as steps are written: the worker's telemetry flusher (never the training
thread) calls `tiers_keep_up` after a write that took a key past a multiple of BASE, so
a finished run's first read finds them made. A read (`series_many`) makes what is missing
(a run recorded before this, a keep-up the database refused) the same way.

Why a row stays true. Points are only ever replaced (a step re-run after a resume gets new
values and a new, higher `seq`) or cut off the end (`run_rewind`). The mark stores the
run's highest `seq` when its rows were made: a point of the key with a higher `seq` below
the mark means a replaced step, and every row from that step on is dropped and made again.
`tiers_forget_after` drops the rows a rewind cut off; a read also drops rows above the
key's newest step, so a rewind that raced a read cannot leave rows behind.

Several readers may extend the same key at once: the mark is advanced by a conditional
UPDATE of the values the reader started from (compare and set) in the same transaction as
its rows, so a reader that lost the race writes nothing and answers from what it computed.
Writing rows is a cache fill: if the database refuses it (locked, gone read-only), the
read still answers.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from django.db import DatabaseError, IntegrityError, connection, transaction

from webapp.runs.models import MetricPoint, MetricTier, MetricTierMark

logger = logging.getLogger(__name__)

BASE = 16
INSERT_BATCH = 500  # 4 000 parameters: under SQLite's limit of 32 766

# (start, min_step, min_value, max_step, max_value)
Block = tuple[int, int, float, int, float]
Point = tuple[int, float]


def bucket_width(*, first: int, last: int, buckets: int) -> int:
    """The narrowest width among 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (2**j and 3 * 2**j) whose
    aligned blocks from `first` to `last` number at most `buckets`. Two families, so the
    series gets at least two thirds of the buckets it may have, not half."""
    width = 1
    while last // width - first // width + 1 > buckets:
        if width == 1:
            width = 2
        elif width & (width - 1) == 0:
            width = width // 2 * 3  # 2**j -> 3 * 2**(j - 1)
        else:
            width = width // 3 * 4  # 3 * 2**(j - 1) -> 2**(j + 1)
    return width


def _tier_level(width: int) -> int | None:
    """The tier rows a bucket of `width` is made of (width itself, or a third of it), or None
    when no tier is that fine and the points are read instead."""
    for level in (width, width // 3 if width % 3 == 0 else 0):
        if level >= BASE and level % BASE == 0 and (level // BASE) & (level // BASE - 1) == 0:
            return level
    return None


def _merge(acc: dict[int, list[Any]], bucket: int, block: Block) -> None:
    """Fold a block into its bucket: the lowest value wins, the earliest step on a tie."""
    _, min_step, min_value, max_step, max_value = block
    held = acc.get(bucket)
    if held is None:
        acc[bucket] = [min_step, min_value, max_step, max_value]
        return
    if (min_value, min_step) < (held[1], held[0]):
        held[0], held[1] = min_step, min_value
    if (-max_value, max_step) < (-held[3], held[2]):
        held[2], held[3] = max_step, max_value


def _blocks(points: list[Point], width: int) -> list[Block]:
    """Points by step into blocks: a strict comparison keeps the earliest step on a tie."""
    blocks: list[Block] = []
    bucket = -1
    min_step = max_step = 0
    min_value = max_value = 0.0
    for step, value in points:
        if step // width != bucket:
            if bucket >= 0:
                blocks.append((bucket * width, min_step, min_value, max_step, max_value))
            bucket, min_step, min_value, max_step, max_value = step // width, step, value, step, value
        elif value < min_value:
            min_step, min_value = step, value
        elif value > max_value:
            max_step, max_value = step, value
    if bucket >= 0:
        blocks.append((bucket * width, min_step, min_value, max_step, max_value))
    return blocks


def _sql(sql: str) -> str:
    quote = connection.ops.quote_name
    return sql.format(
        points=quote(MetricPoint._meta.db_table), tiers=quote(MetricTier._meta.db_table),
        key=quote("key"), value=quote("value"), start=quote("start"), width=quote("width"),
    )


def _points_from(cursor: Any, *, run_id: int, key: str, step: int, below: int | None = None) -> list[Point]:
    sql = "SELECT step, {value} FROM {points} WHERE run_id = %s AND {key} = %s AND {value} IS NOT NULL AND step >= %s"
    params: list[Any] = [run_id, key, step]
    if below is not None:
        sql += " AND step < %s"
        params.append(below)
    cursor.execute(_sql(sql + " ORDER BY step"), params)
    return cursor.fetchall()


def _open_blocks_query(
    *, run_id: int, key: str, through: int, narrower_than: int | None = None
) -> tuple[str, list[Any]]:
    """The complete rows whose parent block is not complete at `through`: the left half of
    the parent holding `through`, where that half ends at or below it. Of the widths below
    `narrower_than`, they tile the steps from the last multiple of `narrower_than` to
    `through`. One row per width at most, each looked up by the index. ("", []): none."""
    wanted: list[int] = []
    width = BASE
    while width <= through and (narrower_than is None or width < narrower_than):
        start = through // (2 * width) * (2 * width)
        if start + width <= through:
            wanted += [width, start]
        width *= 2
    if not wanted:
        return "", []
    # A seek per row: an OR of the pairs lets PostgreSQL walk all of the key's rows instead.
    one = (
        "SELECT {width}, {start}, min_step, min_value, max_step, max_value FROM {tiers}"
        " WHERE run_id = %s AND {key} = %s AND {width} = %s AND {start} = %s"
    )
    params: list[Any] = []
    for index in range(0, len(wanted), 2):
        params += [run_id, key, wanted[index], wanted[index + 1]]
    return " UNION ALL ".join([one] * (len(wanted) // 2)), params


def _open_blocks(cursor: Any, *, run_id: int, key: str, through: int) -> list[tuple[int, Block]]:
    """(width, block) of `_open_blocks_query`."""
    sql, params = _open_blocks_query(run_id=run_id, key=key, through=through)
    if not sql:
        return []
    cursor.execute(_sql(sql), params)
    return [(row[0], tuple(row[1:])) for row in cursor.fetchall()]


def _extension(cursor: Any, *, run_id: int, key: str, cut: int, target: int) -> list[tuple[int, Block]]:
    """The rows of every width that complete between `cut` (rows below it kept) and `target`."""
    new: dict[int, list[Block]] = {BASE: _blocks(_points_from(cursor, run_id=run_id, key=key, step=cut, below=target), BASE)}
    held: dict[int, list[Block]] = {}
    for width, block in _open_blocks(cursor, run_id=run_id, key=key, through=cut):
        held.setdefault(width, []).append(block)
    width = BASE
    while 2 * width <= target:
        parent = 2 * width
        acc: dict[int, list[Any]] = {}
        for block in [*held.get(width, []), *new[width]]:
            _merge(acc, block[0] // parent, block)
        new[parent] = [
            (bucket * parent, *values)
            for bucket, values in sorted(acc.items())
            if cut < (bucket + 1) * parent <= target
        ]
        width = parent
    return [(width, block) for width, blocks in new.items() for block in blocks]


def _store(*, run_id: int, key: str, mark: tuple[int, int] | None, cut: int, target: int, seq: int,
           rows: list[tuple[int, Block]]) -> bool:
    """Replace the key's rows from `cut` on by `rows`, advancing its mark from `mark` to
    (`target`, `seq`), unless another reader moved the mark first. True if written."""
    try:
        with transaction.atomic():
            if mark is None:
                MetricTierMark.objects.create(run_id=run_id, key=key, through_step=target, seq=seq)
            else:
                moved = MetricTierMark.objects.filter(
                    run_id=run_id, key=key, through_step=mark[0], seq=mark[1]
                ).update(through_step=target, seq=seq)
                if moved != 1:
                    return False
            with connection.cursor() as cursor:
                cursor.execute(
                    _sql("DELETE FROM {tiers} WHERE run_id = %s AND {key} = %s AND {start} + {width} > %s"),
                    [run_id, key, cut],
                )
                if connection.vendor == "postgresql":
                    # COPY: binding 8 parameters a row client-side costs seconds on a long run.
                    columns = _sql("{tiers} (run_id, {key}, {width}, {start}, min_step, min_value, max_step, max_value)")
                    with cursor.cursor.copy(f"COPY {columns} FROM STDIN") as copy:
                        for width, block in rows:
                            copy.write_row((run_id, key, width, *block))
                    return True
                # Rows by the hundred a statement: one statement a row costs a round trip each.
                insert = _sql(
                    "INSERT INTO {tiers} (run_id, {key}, {width}, {start}, min_step, min_value, max_step, max_value)"
                    " VALUES "
                )
                for index in range(0, len(rows), INSERT_BATCH):
                    batch = rows[index:index + INSERT_BATCH]
                    cursor.execute(
                        insert + ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s)"] * len(batch)),
                        [v for width, block in batch for v in (run_id, key, width, *block)],
                    )
        return True
    except IntegrityError:
        return False  # another reader made the key's first mark meanwhile
    except DatabaseError:
        # A cache fill: the answer comes from what this read computed.
        logger.warning("metric tiers of run %s, key %r not stored", run_id, key, exc_info=True)
        return False


Mark = tuple[int, int]  # (through_step, seq)


class TierState:
    """What one read knows of a run's tiers: the marks of the keys it reads, each key's
    lowest step among the points stored since its mark (a replaced step, if below the
    mark), and the run's newest `seq`, read before any point a new row is made of."""

    def __init__(self, *, run_id: int, keys: list[str]) -> None:
        self.run_id = run_id
        self.marks: dict[str, Mark] = {
            key: (through, seq)
            for key, through, seq in MetricTierMark.objects.filter(run_id=run_id, key__in=keys)
            .values_list("key", "through_step", "seq")
        }
        with connection.cursor() as cursor:
            cursor.execute(
                _sql("SELECT seq FROM {points} WHERE run_id = %s ORDER BY seq DESC LIMIT 1"), [run_id]
            )
            row = cursor.fetchone()
            self.seq: int = row[0] if row else 0
            self.since: dict[str, int] = {}
            oldest = min((seq for _, seq in self.marks.values()), default=None)
            if oldest is not None and oldest < self.seq:
                # By the (run, seq) index: the points stored since the oldest mark, a few on
                # a live run, none on a finished one; each key counts those after its own.
                marked = list(self.marks.items())
                newer = " ".join(["WHEN %s THEN %s"] * len(marked))
                # Materialized first: asked to GROUP BY key at once, SQLite walks the run's
                # every point by the (run, key, step) index, 1.3 s on 2M points, not the few
                # rows the (run, seq) index finds in a millisecond.
                cursor.execute(
                    _sql(
                        f"WITH recent AS {_materialized()}(SELECT {{key}}, step, seq FROM {{points}}"
                        " WHERE run_id = %s AND seq > %s)"
                        f" SELECT {{key}}, MIN(CASE WHEN seq > CASE {{key}} {newer} END THEN step END)"
                        " FROM recent GROUP BY {key}"
                    ),
                    [run_id, oldest, *(v for key, (_, seq) in marked for v in (key, seq))],
                )
                self.since = {key: step for key, step in cursor.fetchall() if step is not None}


def _materialized() -> str:
    """`MATERIALIZED ` where the database takes it (PostgreSQL 12+, SQLite 3.35+)."""
    if connection.vendor == "sqlite":
        return "MATERIALIZED " if sqlite3.sqlite_version_info >= (3, 35) else ""
    return "MATERIALIZED " if connection.vendor == "postgresql" else ""


KEYS_A_STATEMENT = 16  # ~15 SELECTs a key: under SQLite's 500 in one compound statement


def series_many(
    cursor: Any, *, state: TierState, ends: dict[str, tuple[Point, Point]], buckets: int
) -> dict[str, list[Point]]:
    """Each key's points in aligned buckets of `bucket_width`: each bucket's lowest and
    highest point (the earliest on a tie) and the series' first and last; sorted by step.
    `ends` holds each key's first and last point. Tiers are brought up to date first
    (usually nothing to do), then one statement reads up to KEYS_A_STATEMENT keys."""
    plans: list[tuple[str, Point, Point, int, int | None, int]] = []
    for key, (first, last) in ends.items():
        width = bucket_width(first=first[0], last=last[0], buckets=buckets)
        level = _tier_level(width)
        through = _tiers_through(cursor, state=state, key=key, last_step=last[0]) if level is not None else 0
        plans.append((key, first, last, width, level, through))
    series: dict[str, list[Point]] = {}
    for index in range(0, len(plans), KEYS_A_STATEMENT):
        chunk = plans[index:index + KEYS_A_STATEMENT]
        parts: list[str] = []
        params: list[Any] = []
        for tag, (key, first, _, _, level, through) in enumerate(chunk):
            part_sql, part_params = _series_query(
                run_id=state.run_id, key=key, tag=tag, first=first[0], level=level, through=through
            )
            parts.append(part_sql)
            params += part_params
        cursor.execute(_sql(" UNION ALL ".join(parts)), params)
        rows: list[list[tuple[Any, ...]]] = [[] for _ in chunk]
        for row in cursor.fetchall():
            rows[row[0]].append(row)
        for (key, first, last, width, level, _), key_rows in zip(chunk, rows, strict=True):
            series[key] = _fold(key_rows, first=first, last=last, width=width, level=level)
    return series


def _series_query(
    *, run_id: int, key: str, tag: int, first: int, level: int | None, through: int
) -> tuple[str, list[Any]]:
    """Rows `(tag, part, start, min_step, min_value, max_step, max_value)`: the tier rows of
    the buckets' width (part 0), the rows tiling the steps from the last multiple of it to
    `through` (1), the points from `through` on (2)."""
    parts: list[str] = []
    params: list[Any] = []
    if level is not None:
        parts.append(
            f"SELECT {tag}, 0, {{start}}, min_step, min_value, max_step, max_value FROM {{tiers}}"
            " WHERE run_id = %s AND {key} = %s AND {width} = %s AND {start} >= %s AND {start} <= %s"
        )
        params += [run_id, key, level, first // level * level, through - level]
        open_sql, open_params = _open_blocks_query(run_id=run_id, key=key, through=through, narrower_than=level)
        if open_sql:
            parts.append(open_sql.replace("SELECT {width},", f"SELECT {tag}, 1,"))  # every branch
            params += open_params
    parts.append(
        f"SELECT {tag}, 2, step, step, {{value}}, step, {{value}} FROM {{points}}"
        " WHERE run_id = %s AND {key} = %s AND {value} IS NOT NULL AND step >= %s"
    )
    params += [run_id, key, max(through, first)]
    return " UNION ALL ".join(parts), params


def _fold(rows: list[tuple[Any, ...]], *, first: Point, last: Point, width: int, level: int | None) -> list[Point]:
    picked = {first, last}
    if width == level:
        # A row of that width is a bucket of its own, none of which the other parts touch.
        for row in rows:
            if row[1] == 0:
                picked.add((row[3], row[4]))
                picked.add((row[5], row[6]))
        rows = [row for row in rows if row[1] != 0]
    acc: dict[int, list[Any]] = {}
    for row in rows:
        _merge(acc, row[2] // width, row[2:])
    for min_step, min_value, max_step, max_value in acc.values():
        picked.add((min_step, min_value))
        picked.add((max_step, max_value))
    return sorted(picked)


def _tiers_through(cursor: Any, *, state: TierState, key: str, last_step: int) -> int:
    """Bring the key's rows up to its newest complete block; return the step below which
    its rows are complete and true (the stored mark, lowered where it no longer holds, or
    what this read made)."""
    target = last_step // BASE * BASE
    mark = state.marks.get(key)
    cut = 0
    if mark is not None:
        cut = min(mark[0], target)  # above the newest step: a rewind cut those points off
        replaced = state.since.get(key)
        if replaced is not None:
            cut = min(cut, replaced // BASE * BASE)
        if cut == mark[0] == target:
            if replaced is not None:
                # Only points at or above the mark since it was set: remember them checked.
                try:
                    with transaction.atomic():
                        MetricTierMark.objects.filter(
                            run_id=state.run_id, key=key, through_step=cut, seq=mark[1]
                        ).update(seq=state.seq)
                except DatabaseError:
                    logger.warning("metric tier mark of run %s, key %r not advanced", state.run_id, key)
            return cut
    if target <= cut and mark is None:
        return cut
    rows = _extension(cursor, run_id=state.run_id, key=key, cut=cut, target=target)
    if _store(run_id=state.run_id, key=key, mark=mark, cut=cut, target=target, seq=state.seq, rows=rows):
        return target
    return cut


def tiers_forget_after(*, run_id: int, step: int) -> None:
    """Drop the rows holding steps after `step` (a rewind deletes those points) and lower
    the marks to match. Call in the transaction that deletes the points."""
    through = (step + 1) // BASE * BASE
    with connection.cursor() as cursor:
        cursor.execute(
            _sql("DELETE FROM {tiers} WHERE run_id = %s AND {start} + {width} > %s"), [run_id, through]
        )
    MetricTierMark.objects.filter(run_id=run_id, through_step__gt=through).update(through_step=through)


def tiers_keep_up(*, run_id: int, last_steps: dict[str, int]) -> None:
    """Extend the rows of the keys in `last_steps` (key: its newest step) to their newest
    complete block; what a read would do, done as the steps are written. Nothing to do for
    a key whose mark is already there. A cache fill: a database error is logged, not raised."""
    keys = [key for key, step in last_steps.items() if step >= BASE]
    if not keys:
        return
    try:
        state = TierState(run_id=run_id, keys=keys)
        with connection.cursor() as cursor:
            for key in keys:
                _tiers_through(cursor, state=state, key=key, last_step=last_steps[key])
    except DatabaseError:
        logger.warning("metric tiers of run %s not kept up", run_id, exc_info=True)
