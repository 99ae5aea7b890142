"""`make bench`: run every benchmark, write bench/results/*.json and BENCHMARKS.md.

`python -m bench live_latency` runs one."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.common import ROOT, setup_django, write_result

BENCHMARKS = [
    "live_latency", "training_overhead", "adapter_overhead", "metric_series", "transcript_list", "runs_table",
]
# Run only when named, on a machine with a GPU (`python -m bench gpu_generation`); shown when recorded.
GPU_BENCHMARKS = ["gpu_generation"]
# Minutes long, run only by their own make target (`make loadtest`); shown when recorded.
ON_DEMAND = ["loadtest", "loadtest_quick"]
# Measured by hand on a lent GPU machine with a script of bench/gpu/ (its docstring says how); shown when recorded.
BY_HAND = ["gpu_lora_memory"]
LOAD_HEADING = "## Load: "


def render(results: dict[str, dict]) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Made by `make bench` (figures in `bench/results/*.json`). Each compares against a",
        "baseline measured in the same run, on this project's 2-core machine.",
        "",
    ]
    live = results.get("live_latency")
    if live:
        lines += [
            "## Live latency (trainer logs a step -> 20 WebSocket clients receive it)",
            "",
            "| measure | p50 ms | p99 ms |",
            "|---|---|---|",
            f"| through the sink, database, channel layer and ASGI WebSocket | {live['p50_ms']} | {live['p99_ms']} |",
            f"| baseline: bare channel-layer round trip | {live['baseline_p50_ms']} | {live['baseline_p99_ms']} |",
            "",
            f"{live['samples']} samples ({live['clients']} clients x {live['events']} steps). "
            f"Target p99 <= {live['target_p99_ms']} ms: {'met' if live['pass'] else 'NOT met'}.",
            "",
        ]
    over = results.get("training_overhead")
    if over:
        lines += [
            f"## Training overhead ({over['steps']}-step demo run)",
            "",
            "| path | trainer.train() seconds per round |",
            "|---|---|",
            f"| bare TRL in one process (baseline) | {', '.join(f'{s:.2f}' for s in over['bare_seconds'])} |",
            f"| Celery worker with telemetry | {', '.join(f'{s:.2f}' for s in over['worker_seconds'])} |",
            "",
            "Rounds alternate which side runs first. Both the ratio of medians and the median of the",
            "per-round ratios must be within the target.",
            "",
            f"Ratio of medians: **{over['ratio']:.3f}** (target <= {over['target']}: "
            f"{'met' if over['pass'] else 'NOT met'})"
            + (
                f"; per-round ratios from {over['round_ratio_min']:.3f} to {over['round_ratio_max']:.3f}"
                + (f", median {over['round_ratio_median']:.3f}" if "round_ratio_median" in over else "")
                + "." if "round_ratio_min" in over else "."
            ),
            "",
        ]
    adapter = results.get("adapter_overhead")
    if adapter:
        lines += [
            "## Environment adapter vs the bare openenv client (same echo server)",
            "",
            "| measure | bare client (baseline) | adapter | ratio |",
            "|---|---|---|---|",
            f"| tool-call round trip, p50 ms ({adapter['calls']} calls) | {adapter['bare_call_p50_ms']} | "
            f"{adapter['adapter_call_p50_ms']} | {adapter['call_ratio']} |",
            f"| tool-call round trip, p99 ms | {adapter['bare_call_p99_ms']} | {adapter['adapter_call_p99_ms']} | |",
            f"| steps/s, {adapter['sessions']} concurrent sessions, {adapter['seconds']:g} s, "
            f"a fresh client per episode on both sides | {adapter['bare_fresh_steps_per_s']} | "
            f"{adapter['adapter_steps_per_s']} | {adapter['throughput_ratio']} |",
            f"| steps/s, bare client keeping one connection per session | "
            f"{adapter['bare_persistent_steps_per_s']} | {adapter['adapter_steps_per_s']} | "
            f"{adapter['fresh_client_cost_ratio']} |",
            "",
            "The adapter opens a fresh client at every reset (a restarted server must not carry an",
            "old episode on); the last row is what that rule costs against the cheapest use of the",
            "bare client. Target <= "
            f"{adapter['target']}x on the like-for-like rows (first two): {'met' if adapter['pass'] else 'NOT met'}.",
            "",
        ]
    series = results.get("metric_series")
    if series and "databases" in series:
        lines += [
            f"## Metric series ({series['steps'] // 1000}k steps x {series['keys']} keys, "
            f"max_points={series['max_points']}, over HTTP from uvicorn)",
            "",
            "| database | tiered p50 ms | tiered p95 ms | server CPU ms a request | one key p50 ms "
            "| first read ms (tiers kept) | first read ms (tiers never made) | keep-up a block p50 / p95 ms "
            "| baseline: raw series p50 ms | raw / tiered | points returned | tier rows |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            *[
                f"| {db['database']} | {db['http_p50_ms']} | {db['http_p95_ms']} "
                f"| {db.get('server_cpu_ms_per_request', '')} | {db['http_one_key_p50_ms']} "
                f"| {db['cold_ms']} | {db.get('cold_unkept_ms', '')} "
                f"| {db.get('keep_up_p50_ms', '')} / {db.get('keep_up_p95_ms', '')} "
                f"| {db['baseline_raw_p50_ms']} | **{db['ratio_raw_vs_http']}x** "
                f"| {db['points_returned']} | {db['tier_rows']} |"
                for db in series["databases"].values()
            ],
            "",
            f"`GET /api/runs/<id>/metrics/?key=...&max_points={series['max_points']}` with a session, "
            f"{series['rounds']} rounds after the first read; the baseline asks for the same keys with "
            "max_points=100000, every point, as each series was served before downsampling. The worker's "
            "telemetry flusher keeps the tiers up as steps are written (keep-up: its cost each time the "
            "20 keys pass a block of 16 steps, off the training thread), so the first read finds them "
            "made; 'never made' is a run recorded before that, whose first read makes them. Targets "
            f"p95 <= {series['target_p95_ms']} ms, first read <= {series.get('target_cold_ms', '-')} ms and "
            f">= {series['target_ratio']}x on each database: "
            + ", ".join(
                f"{db['database']} {'met' if db['pass'] else 'NOT met'}" for db in series["databases"].values()
            )
            + ".",
            "",
        ]
    lines += transcript_list_section(results.get("transcript_list"))
    lines += runs_table_section(results.get("runs_table"))
    lines += gpu_generation_section(results.get("gpu_generation"))
    lines += gpu_lora_memory_section(results.get("gpu_lora_memory"))
    lines += loadtest_section(results.get("loadtest")) + loadtest_section(results.get("loadtest_quick"))
    lines += learning_table_section(learning_table(), "Training that teaches: base / SFT / SFT + GRPO")
    lines += learning_table_section(learning_table("learning_table_wordle"), "Wordle: base / SFT / SFT + GRPO")
    # Every search recorded (`--grpo-grid`; learning_table_search*.json), oldest name first.
    for path in sorted((ROOT / "bench" / "results").glob("learning_table_search*.json")):
        lines += learning_table_section(learning_table(path.stem), "GRPO settings searched from the SFT model, a sweep per seed")
    notes = sorted({r["conditions"] for r in results.values() if r.get("conditions")})
    if notes:
        lines += ["## Conditions of the last run", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(lines)


def learning_table_section(table: dict | None, title: str) -> list[str]:
    lines: list[str] = []
    if table:
        lines += [
            f"## {title} ({table['date']})",
            "",
            f"{table.get('score', 'Catches')} out of {table['episodes']}; {table['environment']}. {table['how']}. "
            f"SFT: {table['sft']}. GRPO: {table['grpo']}.",
            "",
            "| " + " | ".join(table["columns"]) + " |",
            "|" + "---|" * len(table["columns"]),
            *["| " + " | ".join(str(cell) for cell in row) + " |" for row in table["rows"]],
            "",
            table["verdict"],
            "",
        ]
        if table.get("note"):  # written by hand beside the recorded figures, never by the command
            lines += [f"Note (by hand): {table['note']}", ""]
    return lines


def runs_table_section(rt: dict | None) -> list[str]:
    if not rt:
        return []

    def cell(db: dict, name: str) -> str:
        return f"{db['http_ms'][name]['p50']} / {db['http_ms'][name]['p95']}"

    return [
        f"## Runs table ({rt['runs']:,} runs, {rt['keys']} keys x {rt['steps']} steps each, "
        f"`GET /api/runs/?limit={rt['page']}`, over HTTP from uvicorn)",
        "",
        "| database | with summaries p50 / p95 ms | baseline: no summaries p50 / p95 ms | filtered + sorted, "
        "with summaries | offset 9,000, with summaries | server CPU ms a request | load average (2 cores) |",
        "|---|---|---|---|---|---|---|",
        *[
            f"| {db['database']} | **{cell(db, 'summaries')}** | {cell(db, 'baseline')} | {cell(db, 'filtered')} "
            f"| {cell(db, 'deep_page')} | {db['server_cpu_ms_per_request']} | {db.get('load_average', '')} |"
            for db in rt["databases"].values()
        ],
        "",
        f"{rt['rounds']} rounds, the four requests interleaved in each, with a session. Summaries: "
        f"`summary=` each of the {rt['keys']} keys ({{last, max, min, step}} a key, one query a page). "
        "Filtered: `tag=lr-sweep&status=succeeded&ordering=-step` (1,286 runs match). "
        f"Target p95 <= {rt['target_p95_ms']} ms with summaries: "
        + ", ".join(f"{db['database']} {'met' if db['pass'] else 'NOT met'}" for db in rt["databases"].values())
        + ".",
        "",
    ]


def transcript_list_section(tl: dict | None) -> list[str]:
    if not tl:
        return []

    def row(label: str, v: dict) -> str:
        return (
            f"| {label} | {v['first_paint_ms']['median']} | {v['list_ready_ms']['median']} | {v['cold_first_paint_ms']} "
            f"| {v['rows_in_dom_at_first_paint']} "
            f"| {v['frame_ms']['p50']} | {v['frame_ms']['p95']} | {v['frame_ms']['max']} "
            f"| {v['max_rows_in_dom_while_scrolling']} |"
        )

    return [
        f"## Transcript list ({tl['rollouts'] // 1000}k stored rollouts; one step of {tl['step_rollouts']} "
        f"rollouts x {tl['turns']} turns, headless Chromium)",
        "",
        f"| page | first paint ms (median of {tl['loads']} warm loads) | list ready ms | cold load: first paint ms "
        "| rows in the DOM | frame p50 ms | frame p95 ms | frame max ms | most rows in the DOM while scrolling |",
        "|---|---|---|---|---|---|---|---|---|",
        row(f"run page, all {tl['rollouts'] // 1000}k rollouts (virtualised)", tl["run_page"]),
        row("the 20-turn step (virtualised)", tl["step_virtual"]),
        row("baseline: the same step rendered whole (`?render=all`, the feed as before)", tl["step_render_all"]),
        "",
        "First paint: navigation start to the first rows on screen (the newest rows, rendered by the server, "
        "timed by Element Timing; the baseline has none, its script draws every row). List ready: to the frame "
        "after the script's list drew its rows with data (it waits for the page's deferred scripts, plotly.js "
        "among them). Frames: requestAnimationFrame deltas while the step's list scrolls "
        f"{tl['scroll_px_per_frame']} px a frame, {tl['step_virtual']['frames']} frames (Chromium's frame-rate "
        "limit and vsync off, so a delta is what the frame cost). Baseline / virtualised: first paint "
        f"**{tl['first_paint_ratio']}x**, list ready **{tl.get('list_ready_ratio', '')}x**, frame p95 "
        f"**{tl['frame_p95_ratio']}x**. Targets first paint <= {tl['target_first_paint_ms']} ms and frame p95 <= "
        f"{tl['target_frame_ms']} ms: {'met' if tl['pass'] else 'NOT met'}."
        + _transcript_list_caveats(tl),
        "",
    ]


def _transcript_list_caveats(tl: dict) -> str:
    """What the targets leave out, said beside them: slow single frames, a late list."""
    notes = []
    slowest = max(tl[name]["frame_ms"]["max"] for name in ("run_page", "step_virtual"))
    if slowest > tl["target_frame_ms"]:
        notes.append(
            f"Not every frame: the slowest virtualised frame took {slowest} ms (a page of transcripts "
            "arriving from the API is parsed between frames)."
        )
    ready = max(tl[name]["list_ready_ms"]["median"] for name in ("run_page", "step_virtual"))
    if ready > tl["target_first_paint_ms"]:
        notes.append(
            f"The virtualised list itself is ready after {ready} ms, once the page's deferred scripts have run; "
            "until then the server's newest rows are on screen."
        )
    return "".join(" " + note for note in notes)


def gpu_lora_memory_section(gpu: dict | None) -> list[str]:
    """Issue 20's device check (bench/gpu/lora_memory.py, run by hand on a lent GPU machine)."""
    if not gpu:
        return []
    rows = [
        f"| {'yes' if v['bf16'] else 'no'} | {'r=16' if v['lora'] else 'no'} | {'yes' if v['gradient_checkpointing'] else 'no'} "
        f"| {v['gpu_memory_gib']:.2f} | {v['trainable_params']:,} | {v['step_s_median']:.3f} |"
        for v in gpu["variants"]
    ]
    return [
        f"## GPU memory: bf16, LoRA and gradient checkpointing ({gpu['date']}, {gpu['gpu']})",
        "",
        f"{gpu['model']}, {gpu['batch']}, {gpu['steps']} steps, torch {gpu['torch']}; {gpu['how']}. Peak memory is "
        "torch.cuda.max_memory_allocated, as the run page's perf/gpu_memory_gib.",
        "",
        "| bf16 | LoRA | gradient checkpointing | peak GPU memory GiB | trainable parameters | step s (median) |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def gpu_generation_section(gpu: dict | None) -> list[str]:
    if not gpu:
        return [
            "## GPU generation: vLLM colocate against transformers",
            "",
            "Not measured yet: it needs a GPU (`python -m bench gpu_generation` on a machine with one and the gpu "
            "extra). No GPU has been lent to this project's sessions so far.",
            "",
        ]

    def row(label: str, v: dict) -> str:
        tokens = f"{v['tokens_per_s']:.0f}" if v.get("tokens_per_s") else "-"
        memory = f"{v['gpu_memory_gib_max']:.2f}" if v.get("gpu_memory_gib_max") else "-"
        return f"| {label} | {v['steps_per_s']:.3f} | {tokens} | {memory} |"

    ratio = gpu.get("tokens_ratio")
    return [
        f"## GPU generation: vLLM colocate against transformers ({gpu['date']}, {gpu['gpu']})",
        "",
        "| generation | steps/s | generated tokens/s | peak GPU memory GiB |",
        "|---|---|---|---|",
        row("vLLM, colocated", gpu["vllm"]),
        row("baseline: transformers", gpu["transformers"]),
        "",
        f"{gpu['steps']}-step demo:echo runs by a real worker with telemetry on. vLLM / transformers: "
        f"{gpu['steps_ratio']:.2f}x steps/s" + (f", {ratio:.2f}x tokens/s." if ratio else "."),
        "",
    ]


def loadtest_section(load: dict | None) -> list[str]:
    """`make loadtest` (bench/loadtest.py), shown as recorded: minutes of N training runs."""
    if not load:
        return []
    s = load["settings"]
    t = load["targets"]
    api_rows = [
        f"| API `GET /api/runs/<id>/{name}/` | {v['p50_ms']} | {v['p95_ms']} | {v['p99_ms']} | {v['max_ms']} "
        f"| {v['count']} |"
        for name, v in load["api"].items()
    ]
    live = load["live"]
    notes = load["notes"]
    overhead = load["overhead_ratio"]
    nice = f", workers at nice {s['worker_nice']}" if s.get("worker_nice") else ""
    return [
        f"{LOAD_HEADING}{s['runs']} training runs, {s['clients']} WebSocket clients, {s['readers']} API readers "
        f"({s['seconds']:g} s window{', --quick' if s.get('quick') else ''}"
        f"{nice}; {load['date']})",
        "",
        "| measure | p50 ms | p95 ms | p99 ms | max ms | samples |",
        "|---|---|---|---|---|---|",
        f"| live: trainer logs a step -> a client receives it | {live['p50_ms']} | {live['p95_ms']} "
        f"| {live['p99_ms']} | {live['max_ms']} | {live['count']} |",
        *api_rows,
        "",
        f"Errors: {load['errors']}. Notes checked by seq: {notes.get('expected', 0)} expected, "
        f"{load['lost_notes']} lost, {load['duplicated_notes']} duplicated. "
        + (
            f"Training: {load['baseline_seconds_per_step']:.3f} s a step without clients, "
            f"{load['loaded_seconds_per_step']:.3f} s with them (median run), overhead **{overhead}x**. "
            if overhead else "Training overhead: not measured (a phase logged under two steps in its window). "
        )
        + f"Targets live p99 <= {t['live_p99_ms']:g} ms: {'met' if load['checks']['live_p99'] else 'NOT met'}; "
        f"API p95 <= {t['api_p95_ms']:g} ms: {'met' if load['checks']['api_p95'] else 'NOT met'}; "
        f"0 errors: {'met' if load['checks']['errors'] else 'NOT met'}; "
        f"0 lost or duplicated notes: {'met' if load['checks']['notes'] else 'NOT met'}. "
        f"{load['database']} database; load average at the end {load['load_average']}"
        + (f" ({load['conditions']})" if load.get("conditions") else "")
        + ". "
        + (
            f"The clients' own event loop ran late by p99 {load['client_loop_lag']['p99_ms']} ms "
            f"(max {load['client_loop_lag']['max_ms']} ms): that much of the live figure is the "
            "watchers' process waiting for a core. "
            if load.get("client_loop_lag")
            else ""
        )
        + _misses(load)
        + _cpu_sentence(load.get("cpu_share"))
        + "Made by `make loadtest` (bench/loadtest.py), not part of `make bench`.",
        "",
        *([load["closing_note"], ""] if load.get("closing_note") else []),
    ]


def _misses(load: dict) -> str:
    """By how much each missed latency target is missed."""
    t = load["targets"]
    missed = []
    live = load["live"].get("p99_ms")
    if live is not None and live > t["live_p99_ms"]:
        missed.append(f"live p99 by {live - t['live_p99_ms']:.0f} ms ({live / t['live_p99_ms']:.1f}x the target)")
    for name, v in load["api"].items():
        p95 = v.get("p95_ms")
        if p95 is not None and p95 > t["api_p95_ms"]:
            missed.append(f"{name} p95 by {p95 - t['api_p95_ms']:.0f} ms ({p95 / t['api_p95_ms']:.1f}x)")
    return f"Missed: {'; '.join(missed)}. " if missed else ""


def _cpu_sentence(shares: dict | None) -> str:
    """Cores' worth of CPU each part of the load test used in its window, alone and loaded."""
    if not shares or not shares.get("loaded"):
        return ""

    def part(phase: dict) -> str:
        return ", ".join(
            f"{name} {value}" for name, value in phase.items() if value is not None and name != "web_waiting"
        )

    waiting = shares["loaded"].get("web_waiting")
    return (
        f"CPU used in the window, in cores: alone {part(shares.get('baseline') or {})}; "
        f"loaded {part(shares['loaded'])}. "
        + (
            f"Loaded, the web server also spent {waiting} s a second runnable but waiting for a core. "
            if waiting is not None
            else ""
        )
    )


def splice_load_sections() -> None:
    """Put the recorded load sections into BENCHMARKS.md in place of the old ones, leaving the
    other sections as they are (`make loadtest` re-measures only its own)."""
    import json

    recorded = {}
    for name in ON_DEMAND:
        path = ROOT / "bench" / "results" / f"{name}.json"
        if path.exists():
            recorded[name] = json.loads(path.read_text())
    new = loadtest_section(recorded.get("loadtest")) + loadtest_section(recorded.get("loadtest_quick"))
    target = ROOT / "BENCHMARKS.md"
    old = target.read_text().split("\n") if target.exists() else render({}).split("\n")
    kept: list[str] = []
    at = None
    inside = False
    for line in old:
        if line.startswith(LOAD_HEADING):
            at = len(kept) if at is None else at
            inside = True
            continue
        if inside and line.startswith("## "):
            inside = False
        if not inside:
            kept.append(line)
    if at is None:
        following = ("## Training that teaches", "## Conditions of the last run")
        at = next((i for i, line in enumerate(kept) if line.startswith(following)), len(kept))
    target.write_text("\n".join(kept[:at] + new + kept[at:]))


def learning_table(name: str = "learning_table") -> dict | None:
    """The guide's table, a recipe of many minutes that `make bench` does not run: made by
    `make learning-table` (bench/learning_table.py) into bench/results/learning_table.json,
    and with `--grpo-grid` (a search) into learning_table_search.json; shown as recorded."""
    import json

    path = ROOT / "bench" / "results" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def main(argv: list[str]) -> int:
    import json

    wanted = argv or BENCHMARKS
    setup_django()
    import importlib

    for name in wanted:
        print(f"== {name}", flush=True)
        result = importlib.import_module(f"bench.{name}").main()
        path = write_result(name, result)
        print(f"   {json.dumps({k: v for k, v in result.items() if not isinstance(v, list)})}")
        print(f"   written to {path.relative_to(ROOT)}")
    render_recorded()
    return 0


def render_recorded() -> None:
    """BENCHMARKS.md again from every recorded bench/results/*.json."""
    import json

    results = {}
    for name in BENCHMARKS + GPU_BENCHMARKS + ON_DEMAND + BY_HAND:
        path = ROOT / "bench" / "results" / f"{name}.json"
        if path.exists():
            results[name] = json.loads(path.read_text())
    Path(ROOT / "BENCHMARKS.md").write_text(render(results))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
