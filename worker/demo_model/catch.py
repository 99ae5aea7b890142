"""The `catch-base` demo model: knows the chat template and Catch's tool-call syntax, not the game.

Its warm-up conversations are Catch episodes played in process (the bundled server's own
`CatchEnvironment`, so the grids are the text a run sees) by a random valid policy: the
model learns to answer every grid with a well-formed `move(direction)` or `stay()` call and
to stop once the ball has landed, but the moves it learned carry no information about
where the ball is. An SFT warm-up on solver episodes and GRPO then have the whole game to
learn (issue 8: base < SFT < SFT+GRPO).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from envs.solvers import Policy, RandomPolicy, ToolCall

# The prompt of the Catch rows in the recipe and the e2e tests.
CATCH_PROMPT = "Catch the ball: use move or stay."
MOVES = ("left", "right")


def catch_tool_schemas() -> list[dict[str, Any]]:
    """The schemas TRL renders for the catch adapter's tools (move, stay)."""
    from envs.adapters.catch import CatchAdapter
    from worker.episodes import tool_schemas

    return tool_schemas(CatchAdapter())


def play_catch(
    policy: Policy, *, seed: int, rows: int, columns: int, prompt: str = CATCH_PROMPT
) -> tuple[list[dict[str, Any]], bool]:
    """One episode on an in-process `CatchEnvironment`, recorded as `worker.episodes`
    records one played through the adapter (reset text appended to the prompt, a tool
    message per call, the policy's closing text). Returns (messages, caught)."""
    from envs.catch.models import CatchAction
    from envs.catch.server import CatchEnvironment
    from worker.episodes import tool_call_message

    env = CatchEnvironment()
    observation = env.reset(seed=seed, rows=rows, columns=columns)
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt + "\n" + observation.text}]
    policy.start(messages[-1]["content"], {"seed": seed})
    last: str | None = None
    while not observation.done:
        call = policy.next_call(last)
        if call is None:
            break
        direction = "stay" if call.name == "stay" else str(call.arguments.get("direction"))
        if call.name not in ("move", "stay") or (call.name == "move" and direction not in MOVES):
            raise ValueError(f"invalid catch call {call!r}")
        messages.append(tool_call_message(call.name, call.arguments))
        observation = env.step(CatchAction(direction=direction))
        last = observation.text
        messages.append({"role": "tool", "name": call.name, "content": last})
    messages.append({"role": "assistant", "content": str(policy.final_text)})
    return messages, observation.outcome == "caught"


def random_catch_conversations(
    *, count: int, rows: int, columns: int, seed: int
) -> list[list[dict[str, Any]]]:
    """`count` episodes of the random valid policy (stay half the time, else left or right),
    on seeds drawn from `seed`: the base model's warm-up."""
    rng = random.Random(seed)
    schemas = catch_tool_schemas()
    return [
        play_catch(
            RandomPolicy(schemas, seed=rng.randrange(2**31)),
            seed=rng.randrange(2**31),
            rows=rows,
            columns=columns,
        )[0]
        for _ in range(count)
    ]


@dataclass(frozen=True)
class CatchCallRate:
    samples: int
    well_formed: int  # parsed into move(direction in left/right) or stay()
    moves: dict[str, int]  # how often each of left / right / stay was chosen

    def as_dict(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "tool_call_rate": round(self.well_formed / self.samples, 4) if self.samples else 0.0,
            "moves": dict(self.moves),
        }


def catch_call(parsed: dict[str, Any]) -> ToolCall | None:
    """The first tool call of a parsed completion if it is a valid catch call, else None."""
    calls = parsed.get("tool_calls") or []
    if not calls:
        return None
    function = calls[0].get("function", {})
    name, arguments = function.get("name"), function.get("arguments")
    if not isinstance(arguments, dict):
        return None
    if name == "stay" and not arguments:
        return ToolCall("stay")
    if name == "move" and set(arguments) == {"direction"} and arguments["direction"] in MOVES:
        return ToolCall("move", {"direction": arguments["direction"]})
    return None


def measure_catch_calls(
    model: Any,
    tokenizer: Any,
    *,
    samples: int,
    temperature: float | None,
    seed: int,
    rows: int,
    columns: int,
) -> CatchCallRate:
    """The first move of fresh episodes (seeds from `seed`), parsed with TRL's
    `parse_response` as GRPOTrainer parses it: how many are well-formed catch calls."""
    from trl.chat_template_utils import add_response_schema, parse_response

    from .evaluation import generate_prompt_completions
    from .rendering import template_tools

    if getattr(tokenizer, "response_template", None) is None:
        add_response_schema(tokenizer)
    from envs.catch.server import CatchEnvironment

    schemas = catch_tool_schemas()
    rng = random.Random(seed)
    conversations = []
    for _ in range(samples):
        observation = CatchEnvironment().reset(
            seed=rng.randrange(2**31), rows=rows, columns=columns
        )
        conversations.append([{"role": "user", "content": CATCH_PROMPT + "\n" + observation.text}])
    prompt_ids, completions = generate_prompt_completions(
        model, tokenizer, conversations, tools=schemas, temperature=temperature, seed=seed
    )
    moves = {"left": 0, "right": 0, "stay": 0}
    well_formed = 0
    for prefix, ids in zip(prompt_ids, completions, strict=True):
        call = catch_call(parse_response(tokenizer, ids, prefix=prefix, tools=template_tools(schemas)))
        if call is not None:
            well_formed += 1
            moves["stay" if call.name == "stay" else call.arguments["direction"]] += 1
    return CatchCallRate(samples=samples, well_formed=well_formed, moves=moves)


def build_catch_into(staging: Any, *, recipe: Any, seed: int, report: Any) -> dict[str, Any]:
    """Train the tokenizer and the model on random-policy episodes, save both to `staging`,
    and measure the first move of fresh episodes as a trainer will load the model."""
    import dataclasses

    from .tokenizer import train_tokenizer
    from .training import encode_conversations, new_model, save_and_reload, supervised_warmup

    schemas = catch_tool_schemas()
    report(f"playing {recipe.train_examples} random-policy catch episodes")
    conversations = random_catch_conversations(
        count=recipe.train_examples, rows=recipe.rows, columns=recipe.columns, seed=seed + 1
    )
    report("training the tokenizer")
    from .rendering import chat_text
    from .tokenizer import _bare_tokenizer, _wrap

    renderer = _wrap(_bare_tokenizer())
    tokenizer = train_tokenizer(
        vocab_size=recipe.vocab_size,
        seed=seed,
        extra_texts=[
            chat_text(renderer, c, tools=schemas) for c in conversations[:200]
        ],
    )
    model = new_model(recipe, tokenizer)
    parameters = sum(p.numel() for p in model.parameters())
    report(
        f"model: Qwen3, {recipe.num_layers} layers, {parameters:,} parameters, vocab {len(tokenizer)}"
    )
    examples = encode_conversations(tokenizer, conversations, tools=schemas)
    sft = supervised_warmup(
        model, examples, recipe, pad_id=tokenizer.pad_token_id, seed=seed, progress=report
    )
    saved_model, saved_tokenizer = save_and_reload(model, tokenizer, staging)
    report(f"measuring the first move of {recipe.eval_samples} fresh episodes")
    rates = {
        label: measure_catch_calls(
            saved_model,
            saved_tokenizer,
            samples=recipe.eval_samples,
            temperature=temperature,
            seed=seed,
            rows=recipe.rows,
            columns=recipe.columns,
        ).as_dict()
        for label, temperature in (("greedy", None), ("temperature_1", 1.0))
    }
    for label, rate in rates.items():
        report(f"{label}: tool call {rate['tool_call_rate']:.0%}, moves {rate['moves']}")
    return {
        "recipe": dataclasses.asdict(recipe),
        "parameters": parameters,
        "vocab_size": len(tokenizer),
        "sft": {"examples": recipe.train_examples, "batch_size": recipe.batch_size, **sft},
        "loosen": None,
        "tool_calls": rates,
    }
