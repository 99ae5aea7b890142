"""bench/catch_policy.py: per ball column, a Catch policy's first move and outcomes."""

from __future__ import annotations

import json

import pytest

from bench.catch_policy import column_seeds, main, play_columns
from envs.catch.server import new_game
from envs.catch.solver import CatchSolver
from envs.solvers import ToolCall


def test_a_seed_per_column_whose_ball_falls_there():
    seeds = column_seeds(4, 3)
    assert sorted(seeds) == [0, 1, 2]
    assert all(new_game(seed, 4, 3).ball_column == column for column, seed in seeds.items())
    assert sorted(column_seeds(6, 5)) == [0, 1, 2, 3, 4]


def solver_chooser():
    """The bundled solver, reading each episode's last text as a run's episodes do."""
    solvers: dict[int, CatchSolver] = {}

    def choose(conversations, turn):
        calls = []
        for conversation in conversations:
            solver = solvers.setdefault(id(conversation), CatchSolver())
            if turn == 0:
                solver.start(conversation[0]["content"], {})
            calls.append(solver.next_call(None if turn == 0 else conversation[-1]["content"]))
        return calls

    return choose


def test_the_solver_catches_every_column_and_staying_only_the_middle_one():
    solved = play_columns(solver_chooser(), episodes=3, rows=4, columns=3)
    assert solved == {
        0: {"first": {"left": 3}, "outcome": {"caught": 3}},
        1: {"first": {"stay": 3}, "outcome": {"caught": 3}},
        2: {"first": {"right": 3}, "outcome": {"caught": 3}},
    }
    stays = play_columns(lambda c, turn: [ToolCall("stay")] * len(c), episodes=2, rows=4, columns=3)
    assert {column: row["outcome"] for column, row in stays.items()} == {
        0: {"missed": 2}, 1: {"caught": 2}, 2: {"missed": 2}}


def test_an_invalid_call_ends_its_episode_unfinished_and_is_counted_as_the_first_move():
    def choose(conversations, turn):
        # Odd turns: no call; the second episode moves up, which is no catch move.
        return [None if turn else ToolCall("move", {"direction": "up" if i else "left"})
                for i, _ in enumerate(conversations)]

    found = play_columns(choose, episodes=2, rows=4, columns=3)
    assert found[0] == {"first": {"invalid": 1, "left": 1}, "outcome": {"unfinished": 2}}


def test_the_command_refuses_a_folder_without_a_model(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        main([str(tmp_path)])
    assert refused.value.code == 2
    assert "is not a saved model folder (no config.json)" in capsys.readouterr().err


def test_the_command_plays_a_saved_model_greedy_and_sampled(tmp_path, capsys):
    """A randomly initialised tiny Qwen3 (the catch-base architecture, untrained: its calls are
    mostly invalid) goes through rendering, generation and TRL's parser; every episode is
    accounted for."""
    import torch

    from worker.demo_model.tokenizer import train_tokenizer
    from worker.demo_model.training import RECIPES, new_model

    tokenizer = train_tokenizer(vocab_size=512, seed=0, conversations=20)
    torch.manual_seed(0)
    new_model(RECIPES["catch-base"], tokenizer).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    output = tmp_path / "policy.json"
    main([str(tmp_path / "model"), "--samples", "3", "--temperature", "1.0", "--output", str(output)])
    report = json.loads(output.read_text())
    assert list(report["by_temperature"]) == ["greedy", "T=1"]
    for label, episodes in (("greedy", 1), ("T=1", 3)):
        for column in ("0", "1", "2"):
            row = report["by_temperature"][label][column]
            assert sum(row["first"].values()) == sum(row["outcome"].values()) == episodes
    assert "ball column 2: first move" in capsys.readouterr().out
