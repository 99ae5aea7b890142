"""The catch-base demo model's pieces (worker/demo_model/catch.py) and Catch's grid-size knobs.

No model is trained here: the build itself takes minutes (measured in its manifest)."""

from __future__ import annotations

import pytest

from envs.catch.server import CatchEnvironment
from envs.solvers import RandomPolicy, policy_for
from worker.demo_model.catch import (
    CATCH_PROMPT,
    catch_call,
    catch_tool_schemas,
    play_catch,
    random_catch_conversations,
)
from worker.demo_model.training import IGNORE_INDEX, RECIPES, CatchRecipe, encode_conversations


def test_reset_sizes_the_grid() -> None:
    observation = CatchEnvironment().reset(seed=3, rows=4, columns=3)
    assert observation.board == ["o . .", ". . .", ". . .", ". P ."]
    assert observation.rows_left == 3
    assert observation.metadata["max_steps"] == 3
    assert observation.text.endswith("Rows left: 3. Move left or right, or stay.")


def test_reset_keeps_the_default_grid() -> None:
    observation = CatchEnvironment().reset(seed=3)
    assert len(observation.board) == 10
    assert observation.board[-1] == ". . P . ."
    assert observation.metadata["max_steps"] == 9


@pytest.mark.parametrize(
    ("name", "value"),
    [("rows", 2), ("rows", 21), ("columns", 1), ("columns", 10), ("rows", "4"), ("columns", True)],
)
def test_reset_refuses_bad_sizes(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"{name} must be an integer from"):
        CatchEnvironment().reset(seed=1, **{name: value})


def test_solver_episode_is_recorded_like_the_adapter_records_it() -> None:
    messages, caught = play_catch(
        policy_for("catch", tools=catch_tool_schemas()), seed=3, rows=4, columns=3
    )
    assert caught is True
    assert messages[0] == {
        "role": "user",
        "content": CATCH_PROMPT + "\no . .\n. . .\n. . .\n. P .\n"
        "o = ball, P = your paddle, . = empty. The ball falls one row per move.\n"
        "Rows left: 3. Move left or right, or stay.",
    }
    calls = [m["tool_calls"][0]["function"] for m in messages if m.get("tool_calls")]
    assert calls == [
        {"name": "move", "arguments": {"direction": "left"}},
        {"name": "stay", "arguments": {}},
        {"name": "stay", "arguments": {}},
    ]
    assert [m["role"] for m in messages] == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]
    assert messages[-2]["content"].endswith("Caught the ball! Reward +1.")
    assert messages[-1] == {"role": "assistant", "content": "Caught the ball."}


def test_random_conversations_are_seeded_and_valid() -> None:
    first = random_catch_conversations(count=5, rows=4, columns=3, seed=7)
    assert first == random_catch_conversations(count=5, rows=4, columns=3, seed=7)
    for messages in first:
        calls = [m["tool_calls"][0]["function"] for m in messages if m.get("tool_calls")]
        assert len(calls) == 3
        assert all(
            c
            in (
                {"name": "stay", "arguments": {}},
                {"name": "move", "arguments": {"direction": "left"}},
                {"name": "move", "arguments": {"direction": "right"}},
            )
            for c in calls
        )
        assert messages[-1] == {"role": "assistant", "content": RandomPolicy.final_text}


def test_catch_call_accepts_only_valid_calls() -> None:
    def parsed(name: str, arguments: object) -> dict[str, object]:
        return {
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]
        }

    assert catch_call(parsed("stay", {})).name == "stay"
    assert catch_call(parsed("move", {"direction": "left"})).arguments == {"direction": "left"}
    assert catch_call(parsed("move", {"direction": "up"})) is None
    assert catch_call(parsed("move", {})) is None
    assert catch_call(parsed("stay", {"direction": "left"})) is None
    assert catch_call(parsed("jump", {})) is None
    assert catch_call({"role": "assistant", "content": "stay"}) is None


def test_examples_label_the_assistant_turns_only() -> None:
    from worker.demo_model.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(vocab_size=600, seed=0, conversations=20)
    messages, _ = play_catch(
        policy_for("catch", tools=catch_tool_schemas()), seed=3, rows=4, columns=3
    )
    (example,) = encode_conversations(tokenizer, [messages], tools=catch_tool_schemas())
    labelled = tokenizer.decode([t for t in example.labels if t != IGNORE_INDEX])
    assert labelled == (
        '<tool_call>\n{"name": "move", "arguments": {"direction": "left"}}\n</tool_call><|im_end|>\n'
        + '<tool_call>\n{"name": "stay", "arguments": {}}\n</tool_call><|im_end|>\n' * 2
        + "Caught the ball.<|im_end|>\n"
    )


def test_catch_base_recipe_matches_its_grid() -> None:
    recipe = RECIPES["catch-base"]
    assert isinstance(recipe, CatchRecipe)
    assert (recipe.rows, recipe.columns) == (4, 3)
    # The echo recipes keep their fields (a built echo model is not seen as stale).
    assert not isinstance(RECIPES["demo"], CatchRecipe)
    assert not isinstance(RECIPES["test"], CatchRecipe)
