"""Solvers and the random policy, played through the real training adapters against real
environment servers (uvicorn subprocesses), and their transcripts against TRL's format."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

import jsonschema
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
from trl.chat_template_utils import add_response_schema, parse_response

from envs.adapters import adapter_class
from envs.adapters.generic import adapter_class_for_server, list_mcp_tools
from envs.catch.solver import CatchSolver, positions
from envs.echo.solver import EchoSolver, phrase_in
from envs.solvers import RandomPolicy, ToolCall, policy_for, random_value, solver_class
from envs.sudoku.models import MAX_BLANKS
from envs.sudoku.server import generate_puzzle, render_grid
from envs.sudoku.solver import SudokuSolver, parse_board, solve
from envs.wordle.server import WORDS, score_guess
from envs.wordle.solver import WordleSolver, marks_for, parse_feedback
from tests.envs.servers import run_env_servers
from tests.envs.wire import SERVER_ENV
from webapp.runs.config import RunEnvironment
from worker.datasets import prompt_rows
from worker.episodes import Episode, adapter_policy, play_episode, play_episodes, tool_schemas

SEEDS = range(20)
# More calls than any bundled episode allows (sudoku with 64 blanks: 138 steps): these tests
# are about how the policies stop, not about a run's or an evaluation's cap.
ROOM = 150
BUNDLED = ("echo", "wordle", "catch", "sudoku")
PROMPTS = {
    "echo": "Echo '{phrase}'.",
    "wordle": "Play Wordle with the guess tool.",
    "catch": "Catch the ball: move the paddle under it.",
    "sudoku": "Solve the sudoku with the place tool.",
    "mcpdemo": "Build the shopping list.",
}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    """One real server per environment, started once for the module, all at once (each
    spends seconds importing openenv)."""
    names = (*BUNDLED, "mcpdemo")
    with run_env_servers(names, SERVER_ENV, startup_timeout=90) as urls:
        yield urls


def adapter_for(name: str, url: str) -> Any:
    """The adapter class TRL would get for this server, instantiated as TRL does."""
    if name == "mcpdemo":
        return adapter_class_for_server(base_url=url, env_name=name)()
    return adapter_class(metadata_name=name, base_url=url, env_name=name)()


def rows_for(name: str, seeds: Sequence[int], **reset: Any) -> list[dict[str, Any]]:
    """Dataset rows as the worker builds them (worker/datasets.py), with the given seeds."""
    item = RunEnvironment(
        environment=1, name=name, prompt=PROMPTS[name], rows=len(seeds), reset=reset
    )
    rows = prompt_rows(item, random.Random(0))
    return [{**row, "seed": seed} for row, seed in zip(rows, seeds, strict=True)]


def calls_of(episode: Episode) -> list[dict[str, Any]]:
    return [m["tool_calls"][0]["function"] for m in episode.messages if m.get("tool_calls")]


# --- each solver wins every episode, through the real adapter and server ---------------


def test_echo_solver_repeats_the_asked_phrase_in_one_call(servers: dict[str, str]) -> None:
    rows = rows_for("echo", SEEDS)

    episodes = play_episodes(
        adapter=adapter_for("echo", servers["echo"]), policy=EchoSolver(), rows=rows, max_calls=ROOM
    )

    assert [(e.won, e.reward, e.tool_calls, e.tool_failures, e.ended_by) for e in episodes] == [
        (True, 1.0, 1, 0, "environment")
    ] * 20
    assert [calls_of(e) for e in episodes] == [
        [{"name": "echo", "arguments": {"message": row["target"]}}] for row in rows
    ]


def test_wordle_solver_wins_every_seeded_game_within_six_guesses(servers: dict[str, str]) -> None:
    rows = rows_for("wordle", SEEDS)

    episodes = play_episodes(
        adapter=adapter_for("wordle", servers["wordle"]), policy=WordleSolver(), rows=rows,
        max_calls=ROOM,
    )

    assert [(e.won, e.reward, e.tool_failures, e.ended_by) for e in episodes] == [
        (True, 1.0, 0, "environment")
    ] * 20
    for episode in episodes:
        guesses = [call["arguments"]["guess"] for call in calls_of(episode)]
        assert 1 <= len(guesses) <= 5 and len(set(guesses)) == len(guesses)
        assert "You won in" in episode.messages[-2]["content"]
        assert f"The word was {guesses[-1].upper()}." in episode.messages[-2]["content"]


def test_catch_solver_catches_every_ball(servers: dict[str, str]) -> None:
    rows = rows_for("catch", SEEDS)

    episodes = play_episodes(
        adapter=adapter_for("catch", servers["catch"]), policy=CatchSolver(), rows=rows,
        max_calls=ROOM,
    )

    assert [(e.won, e.reward, e.tool_calls, e.tool_failures, e.ended_by) for e in episodes] == [
        (True, 1.0, 9, 0, "environment")
    ] * 20
    assert all(
        e.messages[-1] == {"role": "assistant", "content": "Caught the ball."} for e in episodes
    )


@pytest.mark.parametrize("blanks", [20, MAX_BLANKS])
def test_sudoku_solver_fills_every_blank_correctly(servers: dict[str, str], blanks: int) -> None:
    rows = rows_for("sudoku", SEEDS, blanks=blanks)

    episodes = play_episodes(
        adapter=adapter_for("sudoku", servers["sudoku"]), policy=SudokuSolver(), rows=rows,
        max_calls=ROOM,
    )

    assert [(e.won, e.reward, e.tool_calls, e.tool_failures, e.ended_by) for e in episodes] == [
        (True, 1.0, blanks, 0, "environment")
    ] * 20
    assert all(
        e.messages[-2]["content"].endswith("Solved: every cell is filled. Reward 1.00.")
        for e in episodes
    )


# --- solvers offline: what they read, and how they stop --------------------------------


def test_wordle_solver_wins_against_a_fifth_of_the_word_list() -> None:
    """Every fifth secret the server can draw, scored with the server's own marks (no
    server; the whole list takes 8 s of CPU: all 1,265 won, in 3.31 guesses on average)."""
    rounds = []
    for secret in WORDS[::5]:
        solver, result, played = WordleSolver(), None, 0
        while (call := solver.next_call(result)) is not None and played < 6:
            guess = call.arguments["guess"]
            played += 1
            marks = score_guess(guess, secret)
            result = f"{' '.join(guess.upper())}\n{' '.join(marks)}\n" + (
                "You won in 1 guess!" if guess == secret else "2 guesses left."
            )
        assert result is not None and result.endswith("You won in 1 guess!"), secret
        rounds.append(played)
    assert (len(rounds), max(rounds)) == (253, 5)


def test_wordle_solver_drops_a_refused_guess_and_reads_marks_like_the_server() -> None:
    solver = WordleSolver()
    first = solver.next_call(None)
    refused = "Invalid guess 'raise': not in the word list. No guess used; 6 guesses left."

    second = solver.next_call(refused)

    assert first == ToolCall("guess", {"guess": "raise"})
    assert second is not None and second.arguments["guess"] != "raise"
    assert parse_feedback("C R A N E\nX G Y X X\n5 guesses left.") == [("crane", "XGYXX")]
    assert marks_for is score_guess  # the solver marks guesses by the server's own rule


def test_catch_solver_reads_the_grid_and_stops_at_the_outcome() -> None:
    grid = "\n".join([". . . o .", *[". . . . ."] * 8, ". P . . ."])
    solver = CatchSolver()
    solver.start(f"Catch it.\n{grid}\nRows left: 9.", {})

    assert positions(grid) == (3, 1)
    assert solver.next_call(None) == ToolCall("move", {"direction": "right"})
    assert solver.next_call("Missed the ball. Reward -1.") is None
    assert solver.final_text == "Missed the ball."


def test_sudoku_solver_parses_the_drawn_board_and_solves_it() -> None:
    puzzle, _solution = generate_puzzle(7, MAX_BLANKS)

    assert parse_board(f"New sudoku.\n{render_grid(puzzle)}\nFilled 0/64.") == puzzle
    assert solve(puzzle) is not None
    assert parse_board("no board here") is None
    assert solve([[5] * 9] + [[0] * 9] * 8) is None


def test_echo_solver_reads_the_phrase_from_the_prompt_else_the_row() -> None:
    solver = EchoSolver()
    solver.start("Say nothing in particular.", {"target": "blue moon"})

    assert phrase_in('Please echo "red fish" back.') == "red fish"
    assert phrase_in("Repeat exactly: calm sea") == "calm sea"
    assert solver.next_call(None) == ToolCall("echo", {"message": "blue moon"})
    assert solver.next_call("blue moon") is None


# --- the random valid policy -----------------------------------------------------------


@pytest.mark.parametrize("name", [*BUNDLED, "mcpdemo"])
def test_random_policy_makes_only_schema_valid_calls(servers: dict[str, str], name: str) -> None:
    adapter = adapter_for(name, servers[name])
    schemas = {s["function"]["name"]: s["function"]["parameters"] for s in tool_schemas(adapter)}
    policy = adapter_policy(adapter, key=name, kind="random", seed=3)
    rows = rows_for(name, range(4), **({"blanks": 20} if name == "sudoku" else {}))

    episodes = play_episodes(adapter=adapter, policy=policy, rows=rows, max_calls=12)

    calls = [call for episode in episodes for call in calls_of(episode)]
    assert len(calls) >= 4
    for call in calls:
        jsonschema.validate(call["arguments"], schemas[call["name"]])
    assert [e.tool_failures for e in episodes] == [
        0,
        0,
        0,
        0,
    ]  # valid calls: none refused as a call
    assert len({call["name"] for call in calls}) == len(schemas)  # every tool gets tried


def test_random_policy_calls_on_mcpdemo_satisfy_the_servers_own_input_schemas(
    servers: dict[str, str],
) -> None:
    """The MCP tools' bounds (quantity 1-100, a name of 1-64 characters) hold too."""
    served = {tool["name"]: tool["inputSchema"] for tool in list_mcp_tools(servers["mcpdemo"])}
    adapter = adapter_for("mcpdemo", servers["mcpdemo"])

    episodes = play_episodes(
        adapter=adapter,
        policy=adapter_policy(adapter, key="mcpdemo", seed=11),  # no solver: random
        rows=rows_for("mcpdemo", range(6)),
        max_calls=ROOM,
    )

    calls = [call for episode in episodes for call in calls_of(episode)]
    for call in calls:
        jsonschema.validate(call["arguments"], served[call["name"]])
    assert {e.ended_by for e in episodes} == {"environment"}
    assert sum(e.tool_failures for e in episodes) == 0


def test_random_policy_is_reproducible_and_honours_schema_bounds() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "pick",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "n": {"type": "integer", "minimum": 40, "exclusiveMaximum": 43},
                        "x": {"type": ["number", "null"], "minimum": 0.5, "maximum": 0.75},
                        "word": {"type": "string", "minLength": 3, "maxLength": 4},
                        "mode": {"type": "string", "enum": ["a", "b"]},
                        "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2},
                    },
                    "required": ["n", "word", "mode"],
                },
            },
        },
    ]
    parameters = tools[0]["function"]["parameters"]

    first = [RandomPolicy(tools, seed=5).next_call(None) for _ in range(3)]
    calls = [policy.next_call(None) for policy in [RandomPolicy(tools, seed=5)] for _ in range(200)]

    assert first == [first[0]] * 3  # same seed, same first call
    assert calls[0] == first[0]
    for call in calls:
        jsonschema.validate(call.arguments, parameters)
    assert {c.arguments["n"] for c in calls} == {40, 41, 42}
    assert {c.arguments["mode"] for c in calls} == {"a", "b"}
    assert 0 < sum("tags" in c.arguments for c in calls) < 200  # optional: sometimes
    with pytest.raises(ValueError, match="no value satisfies"):
        random_value({"type": "integer", "minimum": 3, "maximum": 2}, random.Random(0))
    with pytest.raises(ValueError, match="at least one tool"):
        RandomPolicy([])


def test_registry_gives_the_solver_of_a_bundled_environment_else_random() -> None:
    tools = [{"type": "function", "function": {"name": "stay", "parameters": {"type": "object"}}}]

    assert [solver_class(key) for key in BUNDLED] == [
        EchoSolver,
        WordleSolver,
        CatchSolver,
        SudokuSolver,
    ]
    assert solver_class("mcpdemo") is None
    assert isinstance(policy_for("wordle", tools=tools), WordleSolver)
    assert isinstance(policy_for("wordle", tools=tools, kind="random"), RandomPolicy)
    assert isinstance(policy_for("mcpdemo", tools=tools), RandomPolicy)
    with pytest.raises(ValueError, match="'solver' or 'random'"):
        policy_for("echo", tools=tools, kind="greedy")


# --- the transcript is what TRL's tool loop builds -------------------------------------


def qwen3_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer carrying TRL's own Qwen3 chat template and response schema
    (built here: the model hub cannot be reached from the tests)."""
    from importlib import resources

    bare = Tokenizer(models.BPE())
    bare.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bare.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bare.train_from_iterator(
        ["tool_call arguments name"],
        trainer=trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=special,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bare, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.add_tokens(
        [
            "<tool_call>",
            "</tool_call>",
            "<tool_response>",
            "</tool_response>",
            "<think>",
            "</think>",
        ]
    )
    template = resources.files("trl").joinpath("chat_templates/qwen3_instruct_2507.jinja")
    tokenizer.chat_template = template.read_text(encoding="utf-8")
    return add_response_schema(tokenizer)


class Scripted:
    """A policy that makes the given calls, then stops."""

    final_text = "Stopping."

    def __init__(self, calls: list[ToolCall]) -> None:
        self._calls = calls

    def start(self, prompt: str, row: Any) -> None:
        self.prompt = prompt

    def next_call(self, last_result: str | None) -> ToolCall | None:
        return self._calls.pop(0) if self._calls else None


def test_transcript_round_trips_through_trls_chat_template_and_parser(
    servers: dict[str, str],
) -> None:
    """Each assistant turn, rendered with the Qwen3 template and parsed back by TRL's
    `parse_response` (what GRPOTrainer does to a completion), is the message we stored;
    each tool result is rendered as a tool response."""
    tokenizer = qwen3_tokenizer()
    adapter = adapter_for("sudoku", servers["sudoku"])
    episode = play_episode(
        adapter=adapter, policy=SudokuSolver(), row=rows_for("sudoku", [4], blanks=3)[0], max_calls=ROOM
    )

    for index, message in enumerate(episode.messages):
        if message["role"] != "assistant":
            continue
        before = tokenizer.apply_chat_template(
            episode.messages[:index],
            tools=episode.tools,
            tokenize=False,
            add_generation_prompt=True,
        )
        full = tokenizer.apply_chat_template(
            episode.messages[: index + 1], tools=episode.tools, tokenize=False
        )
        turn = full[len(before) :].removesuffix("\n")
        assert full.startswith(before)
        parsed = parse_response(
            tokenizer,
            tokenizer(turn)["input_ids"],
            prefix=tokenizer(before)["input_ids"],
            tools=episode.tools,
        )  # as GRPOTrainer parses a completion
        assert parsed == message
    rendered = tokenizer.apply_chat_template(episode.messages, tools=episode.tools, tokenize=False)
    for message in episode.messages:
        if message["role"] == "tool":
            assert f"<tool_response>\n{message['content']}\n</tool_response>" in rendered
    assert [m["role"] for m in episode.messages] == [
        "user",
        *["assistant", "tool"] * 3,
        "assistant",
    ]
    assert episode.messages[0]["content"].startswith(
        PROMPTS["sudoku"] + "\nNew sudoku: fill the 3 empty cells"
    )


def test_failed_calls_are_recorded_as_trl_records_them(servers: dict[str, str]) -> None:
    """An unknown tool and an adapter's refusal become `str({"error": ...})` results, as in
    GRPOTrainer._tool_call_loop; the policy saw the prompt with the reset text appended."""
    adapter = adapter_for("catch", servers["catch"])
    policy = Scripted([ToolCall("jump"), ToolCall("move", {"direction": "up"}), ToolCall("stay")])
    row = rows_for("catch", [1])[0]

    episode = play_episode(adapter=adapter, policy=policy, row=row, max_calls=ROOM)

    refusal = (
        "direction must be 'left' or 'right', got 'up' (call stay() to keep the paddle where it is)"
    )
    assert episode.messages[1:5] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "jump", "arguments": {}}}],
        },
        {"role": "tool", "name": "jump", "content": "{'error': 'Tool jump not found.'}"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "move", "arguments": {"direction": "up"}}}
            ],
        },
        {"role": "tool", "name": "move", "content": str({"error": refusal})},
    ]
    assert episode.messages[6]["name"] == "stay"
    assert episode.messages[6]["content"].endswith("Rows left: 8. Move left or right, or stay.")
    assert episode.messages[-1] == {"role": "assistant", "content": "Stopping."}
    assert (episode.tool_calls, episode.tool_failures, episode.ended_by, episode.won) == (
        3,
        2,
        "policy",
        False,
    )
    assert policy.prompt == episode.messages[0]["content"]
    assert policy.prompt.startswith(PROMPTS["catch"] + "\n")
    assert "Rows left: 9." in policy.prompt


def test_the_call_cap_cuts_a_long_episode_mid_game(servers: dict[str, str]) -> None:
    """20 blanks need 20 placements; at 5 calls the episode stops as TRL stops a rollout at
    its last tool-calling round: after a tool result, with no closing turn."""
    adapter = adapter_for("sudoku", servers["sudoku"])

    episode = play_episode(
        adapter=adapter, policy=SudokuSolver(), row=rows_for("sudoku", [4], blanks=20)[0], max_calls=5
    )

    assert (episode.tool_calls, episode.tool_failures, episode.ended_by, episode.won, episode.lost) == (
        5, 0, "limit", False, False,
    )
    assert [m["role"] for m in episode.messages] == ["user", *["assistant", "tool"] * 5]
    assert episode.reward == pytest.approx(5 / 20)


def test_play_episode_rejects_a_row_without_a_prompt(servers: dict[str, str]) -> None:
    adapter = adapter_for("echo", servers["echo"])

    with pytest.raises(ValueError, match="needs a 'prompt'"):
        play_episode(adapter=adapter, policy=EchoSolver(), row={"seed": 1}, max_calls=ROOM)
    with pytest.raises(ValueError, match="max_calls must be at least 1"):
        play_episode(
            adapter=adapter, policy=EchoSolver(), row=rows_for("echo", [1])[0], max_calls=0
        )


def test_solvers_import_neither_the_worker_nor_the_web_app() -> None:
    """envs/ stands alone: the solvers load without worker, webapp, Django or torch."""
    import subprocess
    import sys

    from tests.envs.servers import REPO_ROOT

    code = (
        "import sys, envs.solvers, envs.echo.solver, envs.wordle.solver, envs.catch.solver, "
        "envs.sudoku.solver; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'worker', 'webapp', 'django', 'torch', 'transformers', 'trl'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )

    assert result.stdout.strip() == "[]"
