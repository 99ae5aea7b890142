"""Reward terms and trees on hand-made episodes, and their compilation to TRL reward
functions: every leaf its own function, and the total (TRL's weighted nansum over the
functions) equal to the tree's composed score."""

from __future__ import annotations

import math
from typing import Any

import pytest

from webapp.rewards.scoring import Episode, recipe_total, term_score
from webapp.rewards.terms import RecipeRef, RewardTerm
from worker.training.rewards import compile_rewards, compile_term


def term(**data: Any) -> RewardTerm:
    return RewardTerm.model_validate(data)


def ep(env_name: str = "wordle", lost: bool = False, **attributes: float) -> Episode:
    return Episode(env_name=env_name, attributes=attributes, lost=lost)


WORDLE_RECIPE = [
    term(
        name="win",
        kind="success_bonus",
        params={"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": 6},
    ),
    term(name="greens", kind="partial_credit", params={"attribute": "best_greens", "scale": 0.1}),
    term(name="invalid", kind="penalty", params={"attribute": "invalid_moves", "scale": 0.1}),
]


@pytest.mark.parametrize(
    ("attributes", "values", "total"),
    [
        (
            dict(won=1, num_guesses=1, best_greens=5, invalid_moves=0),
            [1 + 0.5 * 5 / 6, 0.0, -0.0],
            1 + 0.5 * 5 / 6,
        ),
        (dict(won=1, num_guesses=6, best_greens=5, invalid_moves=0), [1.0, 0.0, -0.0], 1.0),
        (dict(won=0, num_guesses=6, best_greens=3, invalid_moves=0), [0.0, 0.3, -0.0], 0.3),
        (dict(won=0, num_guesses=6, best_greens=0, invalid_moves=2), [0.0, 0.0, -0.2], -0.2),
    ],
)
def test_the_guides_wordle_recipe(attributes, values, total):
    episode = ep(**attributes)
    assert [term_score(t, episode) for t in WORDLE_RECIPE] == pytest.approx(values)
    assert recipe_total(WORDLE_RECIPE, episode) == pytest.approx(total)
    assert (
        round(
            recipe_total(WORDLE_RECIPE, ep(won=1, num_guesses=1, best_greens=5, invalid_moves=0)), 4
        )
        == 1.4167
    )


def test_each_leaf_kind():
    episode = Episode(
        env_name="sudoku",
        attributes={
            "reward": 0.8, "reward_last": 0.6, "reward_sum": 1.5, "reward_max": 0.9, "tool_successes": 2.0,
            "tool_failures": 1.0, "calls_place": 3.0, "failures_place": 1.0, "progress": 0.25, "won": 0.0,
            "steps": 4.0,
        },
        components={"rubric_scores": {"format": 0.5}, "reward_signals": {"wordle.greens": 0.4}, "calls": {"sum": 2.0}},
        completion_tokens=40,
        completion_chars=100,
    )  # fmt: skip
    cases = [
        ({"kind": "env_reward"}, 0.8),
        ({"kind": "env_reward", "params": {"aggregate": "last"}}, 0.6),
        ({"kind": "env_reward", "params": {"aggregate": "sum"}}, 1.5),
        ({"kind": "env_reward", "params": {"aggregate": "max"}}, 0.9),
        ({"kind": "tool_called"}, 1.0),
        ({"kind": "outcome"}, 0.6),
        ({"kind": "success_bonus"}, 0.0),
        ({"kind": "partial_credit", "params": {"attribute": "progress", "scale": 2}}, 0.5),
        ({"kind": "penalty"}, -1.0),
        ({"kind": "penalty", "params": {"attribute": "failures_place", "scale": 0.5}}, -0.5),
        ({"kind": "tool_use"}, 1.0),
        ({"kind": "tool_use", "params": {"tool": "place"}}, 1.0),
        ({"kind": "tool_use", "params": {"tool": "guess"}}, 0.0),
        ({"kind": "length", "params": {"min": 10, "max": 50}}, 1.0),
        ({"kind": "length", "params": {"max": 50, "unit": "characters"}}, 0.0),
        ({"kind": "component", "params": {"source": "rubric_scores", "name": "format"}}, 0.5),
        (
            {"kind": "component", "params": {"source": "reward_signals", "name": "wordle.greens"}},
            0.4,
        ),
        ({"kind": "component", "params": {"source": "calls", "name": "sum"}}, 2.0),
        ({"kind": "component", "params": {"source": "rubric_scores", "name": "missing"}}, None),
        (
            {
                "kind": "expression",
                "params": {"expression": "min(progress * 4, 1) - 0.1 * tool_failures"},
            },
            0.9,
        ),
        ({"kind": "expression", "params": {"expression": "progress + unknown_name"}}, None),
        ({"kind": "expression", "params": {"expression": "1 / won"}}, None),
    ]
    got = [term_score(term(name="t", **spec), episode) for spec, _ in cases]
    assert got == pytest.approx([want for _, want in cases])


def test_outcome_is_none_without_a_reward_and_terms_are_none_elsewhere_or_when_lost():
    assert term_score(term(name="o", kind="outcome"), ep(reward_count=0.0)) is None
    limited = term(name="w", kind="env_reward", environments=["wordle"])
    assert term_score(limited, ep(env_name="echo", reward=1.0)) is None
    assert term_score(limited, ep(env_name="wordle", reward=1.0)) == 1.0
    assert term_score(limited, ep(env_name="wordle", lost=True, reward=1.0)) is None
    # success bonus over an attribute-named limit, and an episode without `won`
    bonus = term(
        name="b",
        kind="success_bonus",
        params={"speed_bonus": 1, "steps": "steps", "max_steps": "limit"},
    )
    assert term_score(bonus, ep(won=1, steps=2, limit=8)) == pytest.approx(1.75)
    assert term_score(bonus, ep(steps=2, limit=8)) is None


def gate(child: dict, threshold: float, **extra: Any) -> dict:
    return {
        "name": "gate",
        "kind": "gate",
        "params": {"threshold": threshold},
        "terms": [child],
        **extra,
    }


def test_gate_follows_openenv():
    child = {"name": "prog", "kind": "partial_credit", "params": {"attribute": "progress"}}
    tree = term(**gate(child, 0.5))
    assert [term_score(tree, ep(progress=p)) for p in (0.2, 0.5, 0.9)] == [0.0, 0.5, 0.9]
    assert term_score(tree, ep()) is None  # the child has nothing to score


def test_sequential_follows_openenv():
    tree = term(
        name="seq",
        kind="sequential",
        terms=[
            {"name": "format_ok", "kind": "tool_called"},
            {**gate({"name": "prog", "kind": "partial_credit", "params": {"attribute": "progress"}}, 0.5), "name": "solved_gate"},
            {"name": "bonus", "kind": "expression", "params": {"expression": "2 * progress"}},
        ],
    )  # fmt: skip
    values: dict[str, float | None] = {}
    assert term_score(tree, ep(tool_successes=0, progress=0.9), values) == 0.0  # first child 0: 0
    assert values == {"format_ok": 0.0, "prog": 0.9, "solved_gate": 0.9, "bonus": 1.8, "seq": 0.0}
    assert term_score(tree, ep(tool_successes=1, progress=0.3)) == 0.0  # the gate cut
    assert term_score(tree, ep(tool_successes=1, progress=0.8)) == pytest.approx(
        1.6
    )  # the last child's
    # A child limited to another environment is not applicable there: skipped.
    skipping = term(
        name="seq",
        kind="sequential",
        terms=[{"name": "echo_only", "kind": "tool_called", "environments": ["echo"]}, {"name": "r", "kind": "env_reward"}],
    )  # fmt: skip
    assert term_score(skipping, ep(env_name="wordle", reward=0.7, tool_successes=0)) == 0.7
    assert term_score(skipping, ep(env_name="echo", reward=0.7, tool_successes=0)) == 0.0


def test_weighted_sum_container_skips_none_children():
    tree = term(
        name="mix",
        kind="weighted_sum",
        terms=[
            {"name": "a", "kind": "env_reward", "weight": 0.7},
            {"name": "b", "kind": "outcome", "weight": 0.3},
        ],
    )
    assert term_score(tree, ep(reward=1.0, reward_last=0.5)) == pytest.approx(0.85)
    assert term_score(tree, ep(reward=1.0)) == pytest.approx(0.7)
    assert term_score(tree, ep()) is None


class FakeAdapter:
    """What the worker's reward functions read from an adapter (envs/adapters/attributes.py):
    plain attributes. No server: the real ones are in test_rewards_episodes.py."""

    def __init__(self, env_name: str = "wordle", **state: Any) -> None:
        self.env_name = env_name
        self.lost = False
        self.rewards: list[float | None] = []
        self.tool_calls = 0
        self.tool_failures = 0
        self.reward = 0.0
        for key, value in state.items():
            setattr(self, key, value)


def trl_total(funcs, weights, **kwargs: Any) -> list[float]:
    """GRPOTrainer's reward: nansum over functions of weight x value (None as NaN)."""
    columns = [func(**kwargs) for func in funcs]
    totals = []
    for row in zip(*columns, strict=True):
        values = [
            w * v for w, v in zip(weights, row, strict=True) if v is not None and not math.isnan(v)
        ]
        totals.append(sum(values))
    return totals


def test_leaf_recipes_compile_as_before():
    funcs, weights = compile_rewards(
        [
            term(name="env_reward", kind="env_reward"),
            term(name="tools", kind="tool_called", weight=0.5),
        ]
    )
    assert [f.__name__ for f in funcs] == ["env_reward", "tools"]
    assert weights == [1.0, 0.5]
    env = FakeAdapter(reward=1.0, tool_calls=2, tool_failures=1)
    assert [f(environments=[env]) for f in funcs] == [[1.0], [1.0]]


def test_a_tree_compiles_to_one_function_per_term_and_the_total_follows_the_tree():
    wordle_tree = term(
        name="gated",
        kind="gate",
        weight=2.0,
        params={"threshold": 0.2},
        terms=[
            {
                "name": "greens",
                "kind": "partial_credit",
                "params": {"attribute": "best_greens", "scale": 0.1},
            }
        ],
    )
    penalty = term(
        name="invalid", kind="penalty", params={"attribute": "invalid_moves", "scale": 0.1}
    )
    funcs, weights = compile_rewards([wordle_tree, penalty])
    assert [f.__name__ for f in funcs] == ["gated", "greens", "invalid"]
    assert weights == [2.0, 0.0, 1.0]
    envs = [
        FakeAdapter(won=False, best_greens=1, invalid_moves=0),  # gated to 0
        FakeAdapter(won=False, best_greens=3, invalid_moves=2),
        FakeAdapter(won=True, best_greens=5, invalid_moves=0),  # partial credit only when not won
    ]
    assert [f(environments=envs) for f in funcs] == [
        [0.0, pytest.approx(0.3), 0.0],
        [pytest.approx(0.1), pytest.approx(0.3), 0.0],
        [-0.0, pytest.approx(-0.2), -0.0],
    ]
    assert trl_total(funcs, weights, environments=envs) == pytest.approx([0.0, 0.4, 0.0])
    lost = FakeAdapter(best_greens=3)
    lost.lost = True
    assert [f(environments=[lost]) for f in funcs] == [[None], [None], [None]]


def test_a_resolved_recipe_reference_compiles_its_terms():
    ref = RecipeRef(recipe=3, version=2, terms=[term(name="r", kind="env_reward")])
    funcs, weights = compile_rewards(ref)
    assert ([f.__name__ for f in funcs], weights) == (["r"], [1.0])
    with pytest.raises(ValueError, match="reward recipe 3 was not resolved"):
        compile_rewards(RecipeRef(recipe=3))


def test_length_reads_completion_ids_and_an_odd_adapter_is_unscored():
    length = compile_term(term(name="len", kind="length", params={"min": 2, "max": 3}))
    assert length(
        environments=[FakeAdapter(), FakeAdapter()], completion_ids=[[1, 2], [1, 2, 3, 4]]
    ) == [1.0, 0.0]

    class Broken:
        env_name = "wordle"

        @property
        def lost(self) -> bool:
            raise RuntimeError("boom")

    assert compile_term(term(name="r", kind="env_reward"))(environments=[Broken()]) == [None]


def test_attributes_are_listed_for_every_bundled_environment_and_read_through_a_router():
    from envs.adapters.attributes import ATTRIBUTES, episode_attributes
    from envs.adapters.router import router_class
    from envs.adapters.wordle import WordleAdapter
    from envs.registry import BUNDLED

    # And a Harbor harness rollout's outcome (worker/training/harness.py), which no bundled server plays.
    assert set(ATTRIBUTES) == set(BUNDLED) | {"harbor"}
    assert all(dict(pairs) for pairs in ATTRIBUTES.values())

    class Bound(WordleAdapter):
        base_url = "http://127.0.0.1:9"  # never contacted: no episode is played here
        env_name = "wordle"

    router = router_class({"wordle": Bound})()
    router._instances["wordle"] = inner = Bound()
    router.env_name = "wordle"
    inner.won, inner.num_guesses, inner.best_greens = True, 2, 5
    inner.rewards, inner._last_metadata = (
        [None, 1.0],
        {"greens": 5, "episode_id": "e1", "note": "text"},
    )
    inner._tool_counts = {"guess": [2, 0]}
    attributes = episode_attributes(router)
    assert {k: attributes[k] for k in ("won", "num_guesses", "best_greens", "max_guesses", "invalid_moves")} == {
        "won": 1.0, "num_guesses": 2.0, "best_greens": 5.0, "max_guesses": 6.0, "invalid_moves": 0.0,
    }  # fmt: skip
    assert (attributes["reward_last"], attributes["reward_count"], attributes["meta_greens"]) == (
        1.0,
        1.0,
        5.0,
    )
    assert (attributes["calls_guess"], attributes["failures_guess"]) == (2.0, 0.0)
    assert "meta_episode_id" not in attributes and "meta_note" not in attributes
    assert not {"capacity", "batch_size", "done", "base_url"} & set(attributes)


def test_a_batch_reads_each_episode_once_and_a_new_batch_reads_it_again(monkeypatch):
    """Every reward function of one batch gets the same completion_ids lists: the episode's
    attributes are read once per rollout, and the trainer stores that same episode."""
    import webapp.rewards.scoring as scoring
    from worker.training.rewards import scored_episode

    reads = []
    real = scoring.episode_from_adapter

    def counting(adapter, **kw):
        reads.append(adapter)
        return real(adapter, **kw)

    monkeypatch.setattr("worker.training.rewards.episode_from_adapter", counting)
    funcs, _ = compile_rewards([term(name="a", kind="env_reward"), term(name="b", kind="tool_called")])
    envs = [FakeAdapter(reward=1.0, tool_calls=1), FakeAdapter(reward=0.0, tool_calls=0)]
    ids = [[1, 2, 3], [4]]
    for f in funcs:
        f(environments=envs, completion_ids=ids, completions=["x", "y"])
    assert len(reads) == 2
    assert scored_episode(envs[0]).attributes["reward"] == 1.0
    assert scored_episode(envs[0]).completion_tokens == 3
    envs[0].reward = 0.5  # the next episode on the same adapter, a new batch: read again
    assert funcs[0](environments=envs, completion_ids=[[1], [2]]) == [0.5, 0.0]
    assert len(reads) == 4
    assert scored_episode(FakeAdapter()) is None
