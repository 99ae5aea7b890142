"""The transcript-list benchmark's pure parts (the benchmark itself runs in `make bench`,
never in the tests): the rows it stores and the BENCHMARKS.md section it writes."""

from __future__ import annotations

from bench.__main__ import render
from bench.transcript_list import TURNS, _messages, summary


def test_a_big_step_rollout_has_twenty_turns_of_assistant_calls_and_tool_answers():
    messages = _messages(7, TURNS)
    assert len(messages) == 20
    assert [m["role"] for m in messages[:4]] == ["assistant", "tool", "assistant", "tool"]
    assert messages[0]["tool_calls"][0]["function"] == {"name": "guess", "arguments": {"word": "crane"}}
    assert messages[1]["content"].startswith("<result turn=1> rollout 7: the quick brown fox")


def test_summary_reports_percentiles_and_the_maximum():
    values = [float(v) for v in range(1, 101)]
    assert summary(values) == {"p50": 51.0, "p95": 95.0, "max": 100.0, "median": 50.5}


def _variant(paint: float, ready: float, p95: float) -> dict:
    return {
        "first_paint_ms": {"median": paint}, "list_ready_ms": {"median": ready}, "cold_first_paint_ms": paint + 1,
        "rows_in_dom_at_first_paint": 17, "frame_ms": {"p50": 2.0, "p95": p95, "max": 9.0}, "frames": 600,
        "max_rows_in_dom_while_scrolling": 26,
    }


def test_the_benchmarks_page_gets_a_transcript_list_section():
    result = {
        "rollouts": 100_000, "step_rollouts": 1000, "turns": 20, "loads": 5, "scroll_px_per_frame": 180,
        "run_page": _variant(500, 900, 5.0), "step_virtual": _variant(400, 800, 4.0),
        "step_render_all": _variant(6000, 6000, 12.0), "first_paint_ratio": 15.0, "list_ready_ratio": 7.5,
        "frame_p95_ratio": 3.0, "target_first_paint_ms": 1000, "target_frame_ms": 16, "pass": True,
    }
    page = render({"transcript_list": result})
    section = page[page.index("## Transcript list"):]
    section = section[: section.find("\n## ", 3)] if "\n## " in section[3:] else section
    assert section.startswith("## Transcript list (100k stored rollouts; one step of 1000 rollouts x 20 turns")
    assert "| the 20-turn step (virtualised) | 400 | 800 | 401 | 17 | 2.0 | 4.0 | 9.0 | 26 |" in section
    assert "first paint **15.0x**, list ready **7.5x**, frame p95 **3.0x**" in section
    assert section.rstrip().endswith("frame p95 <= 16 ms: met.")


def test_the_section_says_when_single_frames_or_the_list_itself_are_slow():
    result = {
        "rollouts": 100_000, "step_rollouts": 1000, "turns": 20, "loads": 5, "scroll_px_per_frame": 180,
        "run_page": _variant(500, 2500.0, 5.0), "step_virtual": {**_variant(400, 800, 4.0), "frame_ms": {
            "p50": 2.0, "p95": 4.0, "max": 80.5}},
        "step_render_all": _variant(6000, 6000, 12.0), "first_paint_ratio": 15.0, "list_ready_ratio": 7.5,
        "frame_p95_ratio": 3.0, "target_first_paint_ms": 1000, "target_frame_ms": 16, "pass": True,
    }
    page = render({"transcript_list": result})
    assert "Not every frame: the slowest virtualised frame took 80.5 ms" in page
    assert "The virtualised list itself is ready after 2500.0 ms" in page
