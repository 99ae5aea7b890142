"""The learning table's arithmetic and option checks (bench/learning_table.py); the command itself runs end to end in tests/e2e/test_learning_table.py."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bench.learning_table import Command, Settings, _grid_table, _table


def settings_for(seeds: list[int]) -> Settings:
    return Settings(
        seeds=seeds, episodes=30, eval_seed=1000, rows=4, columns=3, warmup_episodes=300,
        warmup_epochs=3, warmup_learning_rate=3e-3, grpo_steps=20, grpo_batch=16, num_generations=8,
        grpo_learning_rate=1e-3, temperature=1.0, max_completion_length=384, tool_rounds=5,
        reward="unfinished-minus-one", quick=False,
    )  # fmt: skip


def seed_entry(seed: int, base: int, sft: int, grpo: int) -> dict:
    curve = [[step, -0.5 + step / 20] for step in range(1, 21)]
    return {
        "seed": seed,
        "base": {"catches": base},
        "sft": {"catches": sft},
        "grpo": {"catches": grpo, "reward_curve": curve},
        "seconds": 600.0,
    }


def test_three_seeds_with_a_steady_gain_are_beyond_seed_noise(monkeypatch):
    monkeypatch.delenv("ENVLAB_BENCH_NOTE", raising=False)
    entries = [seed_entry(0, 13, 17, 20), seed_entry(1, 13, 16, 19), seed_entry(2, 13, 18, 21)]
    table = _table(settings_for([0, 1, 2]), entries, elapsed=1800.0)
    # Reward curve ends: the mean of steps 1-5 and of steps 16-20.
    assert table["rows"] == [
        [0, 13, 17, 20, 3, "-0.35 -> 0.40", 10.0],
        [1, 13, 16, 19, 3, "-0.35 -> 0.40", 10.0],
        [2, 13, 18, 21, 3, "-0.35 -> 0.40", 10.0],
        ["mean +- std", "13.0 +- 0.0", "17.0 +- 1.0", "20.0 +- 1.0", "3.0 +- 0.0", "", ""],
    ]
    assert table["summary"] == {
        "base": {"mean": 13.0, "std": 0.0},
        "sft": {"mean": 17.0, "std": 1.0},
        "grpo": {"mean": 20.0, "std": 1.0},
        "gain": {"mean": 3.0, "std": 0.0},
        "beyond_seed_noise": True,
    }
    assert table["verdict"] == (
        "Mean catches of 30: base 13.0, SFT 17.0, SFT+GRPO 20.0; base < SFT: yes, SFT < SFT+GRPO: yes. "
        "mean GRPO gain +3.0 catches, std 0.0 over 3 seeds: beyond seed noise (2 standard errors). "
        f"30.0 minutes in all on {__import__('os').cpu_count()} CPUs."
    )


def test_a_gain_within_the_spread_is_not_beyond_seed_noise_and_partial_runs_say_so(monkeypatch):
    monkeypatch.delenv("ENVLAB_BENCH_NOTE", raising=False)
    # Gains 2, -1, 0: mean 0.33, std 1.53, two standard errors 1.76.
    entries = [seed_entry(0, 13, 17, 19), seed_entry(1, 13, 17, 16), seed_entry(2, 13, 17, 17)]
    table = _table(settings_for([0, 1, 2]), entries, elapsed=60.0)
    assert table["summary"]["gain"] == {"mean": 0.33, "std": 1.53}
    assert table["summary"]["beyond_seed_noise"] is False
    assert "NOT beyond seed noise" in table["verdict"]
    partial = _table(settings_for([0, 1, 2]), entries[:1], elapsed=60.0)
    assert partial["verdict"].startswith("PARTIAL: 1 of 3 seeds done. ")
    assert "one seed: no estimate of seed noise" in partial["verdict"]
    assert len(partial["rows"]) == 1  # no mean row for one seed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "0,x"], "--seeds takes comma-separated integers, e.g. 0,1,2"),
        (["--seeds", "1,1"], "--seeds: one or more distinct seeds from 0"),
        (["--episodes", "0"], "--episodes is 1 to 200"),
        (["--columns", "10"], "--columns is 2 to 9"),
        (["--grpo-batch", "12"], "--num-generations (2 or more) must divide --grpo-batch"),
        (["--url", "http://127.0.0.1:1", "--token", ""], "--url needs --token (or ENVLAB_TOKEN): POST /api/auth/token/ gives one"),
        (["--base-layers", "9"], "--base-layers is 1 to 8 (0: the recipe's)"),
        (["--base-layers", "4", "--game", "wordle"], "--base-layers sizes the catch-base model: Catch only"),
        (["--grpo-grid", "[1"], "--grpo-grid is not JSON: Expecting ',' delimiter: line 1 column 3 (char 2)"),
        (["--grpo-grid", "[1]"], '--grpo-grid is a JSON object: {"grpo.learning_rate": [0.0001, 0.0003]}'),
        (["--grpo-grid", '{"grpo.beta": []}'], "--grpo-grid: grpo.beta needs a non-empty list of values"),
        (["--grpo-grid", '{"grpo.seed": [1, 2]}'], "--grpo-grid: grpo.seed is set by the table itself (seeds, models, environment, reward)"),
        (["--grpo-grid", '{"model.run": [1]}'], "--grpo-grid: model.run is set by the table itself (seeds, models, environment, reward)"),
    ],
)  # fmt: skip
def test_bad_options_are_refused_before_anything_starts(args, message, tmp_path, monkeypatch):
    monkeypatch.delenv("ENVLAB_TOKEN", raising=False)
    with pytest.raises(CommandError) as refused:
        call_command(Command(), *args, "--dir", str(tmp_path / "scratch"))
    assert str(refused.value) == message
    assert not (tmp_path / "scratch").exists()


def member(params: dict, run: int, catches: int | None, *, zero: float = 0.25, status: str = "succeeded") -> dict:
    found = {"params": params, "run": run, "status": status, "error": "" if catches is not None else "boom",
             "reward_curve": [[1, -1.0], [2, 1.0]], "diagnostics": {"frac_reward_zero_std": zero, "entropy": 0.5}}
    return found | ({"catches": catches} if catches is not None else {})


def test_a_search_has_a_row_per_member_failures_included_and_judges_its_best_setting(monkeypatch):
    monkeypatch.delenv("ENVLAB_BENCH_NOTE", raising=False)
    low, high = {"grpo.learning_rate": 0.0001}, {"grpo.learning_rate": 0.001}
    entries = [
        {"seed": seed, "base": {"catches": 8}, "sft": {"catches": sft}, "seconds": 60.0,
         "members": [member(low, 10 + seed, sft + gain), member(high, 20 + seed, sft - 5)]}
        for seed, sft, gain in ((0, 20, 4), (1, 18, 3), (2, 19, 5))
    ]
    entries[1]["members"][1] = member(high, 21, None, status="failed")
    entries[0]["sft"]["by_column"] = {"0": [14, 14], "1": [0, 8], "2": [6, 8]}
    entries[0]["members"][0]["by_column"] = {"0": [14, 14], "1": [4, 8], "2": [6, 8]}
    chosen = Settings(**{**settings_for([0, 1, 2]).__dict__, "grpo_grid": {"grpo.learning_rate": [0.0001, 0.001]}})
    table = _grid_table(chosen, entries, elapsed=600.0)
    # Catch: what each model catches of each ball column, SFT -> SFT+GRPO ('-': not measured).
    assert table["columns"][-1] == "caught of each ball column (c0 = left), SFT -> SFT+GRPO"
    assert [row[-1] for row in table["rows"][:4]] == [
        "c0 14/14, c1 0/8, c2 6/8 -> c0 14/14, c1 4/8, c2 6/8", "- -> -", "- -> -", ""]
    assert table["columns"][:6] == ["GRPO setting", "seed", "base", "SFT", "SFT+GRPO", "GRPO - SFT"]
    assert [[*row[:6], row[9]] for row in table["rows"]] == [
        ["learning_rate=0.0001", 0, 8, 20, 24, 4, 10],
        ["learning_rate=0.0001", 1, 8, 18, 21, 3, 11],
        ["learning_rate=0.0001", 2, 8, 19, 24, 5, 12],
        ["learning_rate=0.0001", "mean +- std", "", "", "", "+4.0 +- 1.0 (SE 0.6)", ""],
        ["learning_rate=0.001", 0, 8, 20, 15, -5, 20],
        ["learning_rate=0.001", 1, 8, 18, "failed: boom", "", 21],
        ["learning_rate=0.001", 2, 8, 19, 14, -5, 22],
        ["learning_rate=0.001", "mean +- std", "", "", "", "-5.0 +- 0.0 (SE 0.0)", ""],
    ]
    assert table["rows"][0][6:9] == ["-1.00 -> 1.00", "0.25", "0.500"]
    best = table["summary"]["best"]
    # Gains 4, 3, 5: mean 4 >= 3 catches and >= 2 standard errors (1.15).
    assert (best["setting"], best["gain_mean"], best["target_met"]) == ("learning_rate=0.0001", 4.0, True)
    # A setting with a failed seed never meets the target, whatever its mean.
    assert [s["target_met"] for s in table["summary"]["settings"]] == [True, False]
    assert "best setting learning_rate=0.0001: mean gain +4.0 catches over 3 of 3 seeds" in table["verdict"]
    assert "MET" in table["verdict"] and table["summary"]["sft"] == {"mean": 19.0, "std": 1.0}


def test_a_search_is_recorded_under_what_it_searched_and_the_table_keeps_its_file():
    from bench.learning_table import _default_output

    plain = settings_for([0])
    searched = Settings(**{**plain.__dict__, "grpo_grid": {"grpo.temperature": [1, 1.5], "grpo.learning_rate": [1]}})
    assert _default_output(plain).name == "learning_table.json"
    assert _default_output(searched).name == "learning_table_search_learningrate-temperature.json"


def test_another_game_or_another_sft_model_is_another_record():
    from bench.learning_table import _default_output

    plain = settings_for([0])
    grid = {"grpo.learning_rate": [1]}
    lighter_sft = Settings(**{**plain.__dict__, "grpo_grid": grid, "warmup_epochs": 1})
    wordle = Settings(**{**plain.__dict__, "grpo_grid": grid, "game": "wordle"})
    assert _default_output(lighter_sft).name == "learning_table_search_learningrate-sftepochs1.json"
    assert _default_output(wordle).name == "learning_table_search_wordle_learningrate.json"
    assert _default_output(Settings(**{**plain.__dict__, "game": "wordle"})).name == "learning_table_wordle.json"
    larger = Settings(**{**plain.__dict__, "grpo_grid": grid, "base_layers": 4})
    assert _default_output(larger).name == "learning_table_search_learningrate-baselayers4.json"


def test_every_setting_reaches_the_run_in_the_scratch_installation():
    import dataclasses

    from bench.learning_table import FORWARDED

    # A setting left out of FORWARDED would silently take its default there.
    assert {f.name for f in dataclasses.fields(Settings)} - {"quick"} <= set(FORWARDED)


def test_a_larger_base_model_is_built_under_its_own_name_with_its_layers(tmp_path):
    from bench.learning_table import base_model_name
    from worker.demo_model import demo_model_path
    from worker.demo_model.training import CATCH_BASE

    plain = settings_for([0])
    larger = Settings(**{**plain.__dict__, "base_layers": 4})
    assert plain.base_recipe().num_layers == CATCH_BASE.num_layers == 2
    assert larger.base_recipe().num_layers == 4
    assert larger.base_recipe().hidden_size == CATCH_BASE.hidden_size
    # Its own folder (a valid demo-model name), so the two builds do not replace each other.
    assert base_model_name(plain, 3) == "catch-base-4x3-s3"
    assert base_model_name(larger, 3) == "catch-base-4x3-l4-s3"
    assert demo_model_path(base_model_name(larger, 3), tmp_path).name == "catch-base-4x3-l4-s3"


def test_a_wordle_search_counts_words_found_and_asks_for_no_grid(monkeypatch):
    monkeypatch.delenv("ENVLAB_BENCH_NOTE", raising=False)
    chosen = Settings(**{**settings_for([0, 1, 2]).__dict__, "game": "wordle",
                         "grpo_grid": {"grpo.learning_rate": [0.0003]}})  # fmt: skip
    assert chosen.reset() == {} and settings_for([0]).reset() == {"rows": 4, "columns": 3}
    from envs.wordle.lab import LAB

    assert chosen.played.prompt == LAB.prompt and chosen.played.recipe_terms[1]["kind"] == "partial_credit"
    entries = [
        {"seed": seed, "base": {"wins": 0, "best_greens": 0.5}, "sft": {"wins": sft, "best_greens": 1.25},
         "members": [{"params": {}, "run": seed + 2, "status": "succeeded",
                      "wins": grpo, "best_greens": None, "reward_curve": [[1, 0.1], [2, 0.2]], "diagnostics": {}}]}
        for seed, sft, grpo in ((0, 1, 1), (1, 0, 2), (2, 2, 1))
    ]  # fmt: skip
    table = _grid_table(chosen, entries, elapsed=60.0)
    # One value searched: the sweep names no differing path, the table still names the setting.
    assert [row[0] for row in table["rows"]] == ["learning_rate=0.0003"] * 4
    assert [row[2:6] for row in table["rows"][:3]] == [[0, 1, 1, 0], [0, 0, 2, 2], [0, 2, 1, -1]]
    assert table["columns"][-1] == "best_greens, base / SFT / SFT+GRPO"
    assert table["rows"][0][-1] == "0.50 / 1.25 / -" and len(table["rows"][3]) == len(table["columns"])
    assert table["score"] == "Words found" and table["environment"] == "wordle, bundled server"
    assert "--game wordle" in table["how"] and "partial_credit best_greens" in table["grpo"]
    assert table["verdict"].startswith("Mean wins of 30: base 0.0, SFT 1.0; base < SFT: yes.")
    assert "mean gain +0.3 wins over 3 of 3 seeds" in table["verdict"]


def test_a_recorded_table_renders_with_its_hand_written_note_marked_as_such():
    from bench.__main__ import learning_table_section

    table = {"date": "2026-12-07", "score": "Words found", "episodes": "30 greedy episodes", "environment": "wordle",
             "how": "h", "sft": "s", "grpo": "g", "columns": ["seed", "base"], "rows": [[0, 1]], "verdict": "v."}
    lines = learning_table_section(table, "Title")
    assert lines[0] == "## Title (2026-12-07)" and lines[2].startswith("Words found out of 30 greedy episodes; wordle.")
    assert "| 0 | 1 |" in lines and not any(line.startswith("Note") for line in lines)
    noted = learning_table_section({**table, "note": "stopped early."}, "Title")
    assert noted[-2:] == ["Note (by hand): stopped early.", ""]


def test_a_second_sigterm_during_cleanup_stops_every_service_all_the_same(tmp_path, monkeypatch):
    """Killing the command and its scratch child at once sends the child two SIGTERMs: the
    second, arriving while the first one's cleanup runs, must not leave services running."""
    import os
    import signal
    import sys

    import bench.learning_table as table

    real_stop = table._stop
    calls = []

    def stop_after_a_second_sigterm(process):
        if not calls:
            os.kill(os.getpid(), signal.SIGTERM)  # lands mid-cleanup
        calls.append(process.pid)
        real_stop(process)

    monkeypatch.setattr(table, "_stop", stop_after_a_second_sigterm)
    previous = signal.signal(signal.SIGTERM, table._exit_on_sigterm)
    services = [table._spawn(name, [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path)
                for name in ("web", "worker")]
    server_stopped = []
    try:
        table._stop_services(services, lambda: server_stopped.append(True))
        assert signal.getsignal(signal.SIGTERM) is table._exit_on_sigterm  # restored after the cleanup
    finally:
        signal.signal(signal.SIGTERM, previous)
        for process in services:
            if process.poll() is None:
                process.kill()
    assert calls == [services[1].pid, services[0].pid]
    assert [process.poll() is not None for process in services] == [True, True]
    assert server_stopped == [True]
