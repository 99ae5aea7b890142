"""How a Catch model plays each ball column: its first move and the episode's outcome, greedy and sampled.

    python -m bench.catch_policy MODEL_DIR [--samples 64] [--temperature 1.0 1.5] [--rows 4 --columns 3]

The learning table counts a model's catches per ball column (which balls it misses); this
says what the model does there and what GRPO's sampling sees: per column, the first moves of
`--samples` episodes at each temperature (and of one greedy episode), and how the episodes
ended. A column where every sample makes the same move gives GRPO groups with no reward
variance; a column whose likeliest move is wrong while the right one is sampled often is one
GRPO can fix, if the model tells that column apart from the others.

Episodes are played in process on the bundled server's own `CatchEnvironment`, rendered and
parsed as a run renders and parses them (worker/demo_model/catch.py). `MODEL_DIR`: a saved
model folder (a demo build, a run's `warmup/model` or a `checkpoint-N`).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from envs.solvers import ToolCall

Conversation = list[dict[str, Any]]
# Given the episodes still playing and the turn (0 first), each one's next call (None: no valid call).
Chooser = Callable[[list[Conversation], int], list[ToolCall | None]]


def column_seeds(rows: int, columns: int) -> dict[int, int]:
    """The smallest reset seed whose ball falls in each column."""
    from envs.catch.server import new_game

    seeds: dict[int, int] = {}
    seed = 0
    while len(seeds) < columns:
        seeds.setdefault(new_game(seed, rows, columns).ball_column, seed)
        seed += 1
    return dict(sorted(seeds.items()))


def play_columns(choose: Chooser, *, episodes: int, rows: int, columns: int) -> dict[int, dict[str, dict[str, int]]]:
    """Per ball column, `episodes` episodes played by `choose`: {column: {"first": {move: n},
    "outcome": {caught|missed|unfinished: n}}}. A call that is not a valid move ends its
    episode unfinished (a run's tool loop would record a failed call)."""
    from envs.catch.models import CatchAction
    from envs.catch.server import CatchEnvironment
    from worker.demo_model.catch import CATCH_PROMPT
    from worker.episodes import tool_call_message

    found: dict[int, dict[str, dict[str, int]]] = {}
    for column, seed in column_seeds(rows, columns).items():
        envs = [CatchEnvironment() for _ in range(episodes)]
        observations = [env.reset(seed=seed, rows=rows, columns=columns) for env in envs]
        conversations: list[Conversation] = [
            [{"role": "user", "content": CATCH_PROMPT + "\n" + o.text}] for o in observations
        ]
        first: collections.Counter[str] = collections.Counter()
        outcome: collections.Counter[str] = collections.Counter()
        playing = list(range(episodes))
        turn = 0
        while playing:
            calls = choose([conversations[i] for i in playing], turn)
            still = []
            for i, call in zip(playing, calls, strict=True):
                direction = _direction(call)
                if turn == 0:
                    first[direction or "invalid"] += 1
                if call is None or direction is None:
                    outcome["unfinished"] += 1
                    continue
                observation = envs[i].step(CatchAction(direction=direction))
                conversations[i] += [
                    tool_call_message(call.name, call.arguments),
                    {"role": "tool", "name": call.name, "content": observation.text},
                ]
                if observation.done:
                    outcome[str(observation.outcome)] += 1
                else:
                    still.append(i)
            playing = still
            turn += 1
        found[column] = {"first": dict(sorted(first.items())), "outcome": dict(sorted(outcome.items()))}
    return found


def _direction(call: ToolCall | None) -> str | None:
    if call is None:
        return None
    if call.name == "stay" and not call.arguments:
        return "stay"
    direction = call.arguments.get("direction") if call.name == "move" else None
    return direction if direction in ("left", "right") else None


def model_chooser(model: Any, tokenizer: Any, *, temperature: float | None, seed: int = 0) -> Chooser:
    """A saved model's next calls, rendered with the catch tools and parsed with TRL's parser
    as GRPOTrainer parses them; `temperature` None: greedy."""
    from trl.chat_template_utils import add_response_schema, parse_response

    from worker.demo_model.catch import catch_call, catch_tool_schemas
    from worker.demo_model.evaluation import generate_prompt_completions
    from worker.demo_model.rendering import template_tools

    if getattr(tokenizer, "response_template", None) is None:
        add_response_schema(tokenizer)
    schemas = catch_tool_schemas()
    tools = template_tools(schemas)

    def choose(conversations: list[Conversation], turn: int) -> list[ToolCall | None]:
        prompt_ids, completions = generate_prompt_completions(
            model, tokenizer, conversations, tools=schemas, temperature=temperature, seed=seed * 1000 + turn
        )
        return [
            catch_call(parse_response(tokenizer, ids, prefix=prefix, tools=tools))
            for prefix, ids in zip(prompt_ids, completions, strict=True)
        ]

    return choose


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.catch_policy", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="a saved model folder")
    parser.add_argument("--samples", type=int, default=64, help="sampled episodes per column and temperature")
    parser.add_argument("--temperature", type=float, nargs="+", default=[1.0])
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--columns", type=int, default=3)
    parser.add_argument("--output", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    if not (args.model / "config.json").is_file():
        parser.error(f"{args.model} is not a saved model folder (no config.json)")
    if not 1 <= args.samples <= 1024 or any(not 0 < t <= 10 for t in args.temperature):
        parser.error("--samples is 1 to 1024 and each --temperature above 0, at most 10")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True)
    model.eval()
    report: dict[str, Any] = {"model": str(args.model), "rows": args.rows, "columns": args.columns,
                              "paddle_column": args.columns // 2, "by_temperature": {}}
    for temperature in (None, *args.temperature):
        episodes = 1 if temperature is None else args.samples
        with torch.no_grad():
            found = play_columns(model_chooser(model, tokenizer, temperature=temperature),
                                 episodes=episodes, rows=args.rows, columns=args.columns)
        label = "greedy" if temperature is None else f"T={temperature:g}"
        report["by_temperature"][label] = {str(column): row for column, row in found.items()}
        for column, row in found.items():
            print(f"{label:>8} ball column {column}: first move {row['first']}, outcome {row['outcome']}", flush=True)
    if args.output:
        args.output.write_text(json.dumps(report, indent=2) + "\n")
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
