"""The load test's pure parts (bench/loadtest.py): percentiles, the seq check that finds lost and
duplicated live notes, seconds per step in a window, the options, and BENCHMARKS.md's section.
The harness itself takes minutes of real training (`make loadtest`)."""

from __future__ import annotations

import pytest

from bench.__main__ import loadtest_section
from bench.loadtest import note_range, parse, percentile, seconds_per_step, seq_check, summarise_ms


def test_percentiles_are_nearest_rank_and_empty_is_none():
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 51.0  # index round(49.5) = 50, the 51st value
    assert percentile(values, 95) == 95.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([], 99) is None
    summary = summarise_ms([0.010, 0.020, 0.030])
    assert summary == {"count": 3, "p50_ms": 20.0, "p95_ms": 30.0, "p99_ms": 30.0, "max_ms": 30.0}
    assert summarise_ms([])["p99_ms"] is None


def test_note_ranges_come_from_metrics_and_rollouts_notes_only():
    assert note_range({"type": "metrics", "seq": 7, "step": 3, "values": {}}) == (7, 7)
    assert note_range({"type": "rollouts", "seq": 12, "first_seq": 9, "count": 4}) == (9, 12)
    assert note_range({"type": "facts", "event": 3}) is None
    assert note_range({"type": "status", "status": "running"}) is None
    assert note_range({"type": "metrics", "seq": "7"}) is None


def test_a_complete_stream_has_nothing_lost_or_duplicated():
    # metrics seq 1, rollouts 2-5, metrics 6, rollouts 7-10: the worker's pattern.
    ranges = [(1, 1), (2, 5), (6, 6), (7, 10)]
    assert seq_check(0, ranges, 10) == {"expected": 10, "received": 10, "lost": 0, "duplicated": 0, "unexpected": 0}


def test_a_gap_a_duplicate_and_a_missing_tail_are_counted():
    ranges = [(1, 1), (2, 5), (2, 5), (7, 10)]  # rollouts 2-5 twice, metrics 6 missing
    check = seq_check(0, ranges, 12)  # 11 and 12 were written but never arrived
    assert check["lost"] == 3
    assert check["duplicated"] == 4
    assert check["received"] == 9


def test_notes_already_in_the_snapshot_are_neither_expected_nor_duplicates():
    # Joined when the run was at seq 5: notes up to 5 published while joining are covered by
    # the snapshot; a rollouts note straddling it counts only its newer seqs.
    ranges = [(5, 5), (3, 6), (7, 7)]
    assert seq_check(5, ranges, 7) == {"expected": 2, "received": 2, "lost": 0, "duplicated": 0, "unexpected": 0}


def test_seqs_past_the_runs_last_seq_are_unexpected():
    assert seq_check(0, [(1, 1), (2, 3)], 2)["unexpected"] == 1


def test_seconds_per_step_uses_only_the_window():
    points = [(1, 100.0), (2, 101.0), (3, 103.0), (4, 105.0), (5, 107.0), (6, 150.0)]
    assert seconds_per_step(points, 102.0, 108.0) == pytest.approx(2.0)
    assert seconds_per_step(points, 200.0, 300.0) is None
    assert seconds_per_step([(3, 103.0)], 0.0, 1e9) is None


def test_quick_shrinks_only_what_was_not_given_and_bad_values_are_refused(capsys):
    chosen, _ = parse([])
    assert (chosen.runs, chosen.clients, chosen.readers, chosen.seconds) == (5, 100, 20, 300.0)
    chosen, _ = parse(["--quick", "--clients", "40"])
    assert (chosen.runs, chosen.clients, chosen.readers, chosen.seconds) == (2, 40, 5, 60.0)
    with pytest.raises(SystemExit):
        parse(["--runs", "0"])
    assert "--runs is 1 to 16" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["--worker-nice", "20"])
    assert "--worker-nice is 0 to 19" in capsys.readouterr().err


def test_benchmarks_section_says_which_targets_are_missed():
    summary = {"count": 10, "p50_ms": 20.0, "p95_ms": 90.0, "p99_ms": 150.0, "max_ms": 200.0}
    load = {
        "date": "2026-12-04", "settings": {"runs": 2, "clients": 20, "readers": 5, "seconds": 60.0},
        "live": summary, "api": {"metrics": summary, "rollouts": summary}, "errors": 0,
        "notes": {"expected": 40}, "lost_notes": 0, "duplicated_notes": 0,
        "baseline_seconds_per_step": 1.0, "loaded_seconds_per_step": 1.25, "overhead_ratio": 1.25,
        "targets": {"live_p99_ms": 100.0, "api_p95_ms": 300.0},
        "checks": {"live_p99": False, "api_p95": True, "errors": True, "notes": True},
        "database": "sqlite", "load_average": [2.0, 2.0, 2.0],
    }  # fmt: skip
    text = "\n".join(loadtest_section(load))
    assert "live p99 <= 100 ms: NOT met" in text
    assert "Missed: live p99 by 50 ms (1.5x the target)." in text
    assert "API p95 <= 300 ms: met" in text
    assert "overhead **1.25x**" in text
    assert "`GET /api/runs/<id>/rollouts/`" in text
    assert loadtest_section(None) == []
