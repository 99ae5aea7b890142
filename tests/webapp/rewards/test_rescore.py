"""Re-scoring a stored run (webapp/workbench/rescore.py): GRPO's advantages as TRL 1.16 computes
them, on hand-made groups with exact numbers, and the old-vs-new report: sign changes, the
zero-variance fractions, per-term means, and what could not be re-scored."""

from __future__ import annotations

import math

import pytest
import torch
from trl.trainer.utils import nanstd

from webapp.rewards.terms import RewardTerm
from webapp.workbench.rescore import RescoreError, Rescorer, group_advantages, overlaid_histogram

NAN = float("nan")
OLD = [RewardTerm(name="env_reward", kind="env_reward", weight=1.0)]
NEW = [RewardTerm(name="tool_called", kind="tool_called", weight=1.0)]


def trl_advantages(totals: list[float], group: int, scale_rewards: str) -> list[float]:
    """The lines of trl 1.16 GRPOTrainer._generate_and_score_completions
    (sum_then_normalize) on a batch of totals, copied to check ours against."""
    rewards = torch.tensor(totals, dtype=torch.float64)
    mean = torch.nanmean(rewards.view(-1, group), dim=1).repeat_interleave(group, dim=0)
    if scale_rewards in ("group", "none"):
        std = nanstd(rewards.view(-1, group), dim=1).repeat_interleave(group, dim=0)
    else:
        std = nanstd(rewards).expand_as(rewards)
    advantages = rewards - mean
    if scale_rewards != "none":
        advantages = advantages / (std + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0).tolist()


def test_group_advantages_are_trls_formula_with_exact_numbers():
    # mean 0.25, Bessel std sqrt((0.75^2 + 3 x 0.25^2) / 3) = 0.5
    assert group_advantages([1.0, 0.0, 0.0, 0.0], scale_rewards="group") == pytest.approx(
        [0.75 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001], abs=1e-12
    )
    # An unscorable rollout (NaN) is out of the baseline and gets 0: mean 0.5, std sqrt(0.5).
    assert group_advantages([1.0, NAN, 0.0], scale_rewards="group") == pytest.approx(
        [0.5 / (math.sqrt(0.5) + 1e-4), 0.0, -0.5 / (math.sqrt(0.5) + 1e-4)], abs=1e-12
    )
    # One scored rollout: the std is NaN, so every advantage is 0.
    assert group_advantages([2.0, NAN], scale_rewards="group") == [0.0, 0.0]
    # Every rollout the same: zero variance, zero advantages.
    assert group_advantages([0.5, 0.5, 0.5], scale_rewards="group") == [0.0, 0.0, 0.0]
    assert group_advantages([3.0, 1.0], scale_rewards="none") == [1.0, -1.0]
    assert group_advantages([3.0, 1.0], scale_rewards="batch", batch_std=2.0) == pytest.approx(
        [1.0 / 2.0001, -1.0 / 2.0001], abs=1e-12
    )
    with pytest.raises(ValueError, match="scale_rewards is one of group, batch, none"):
        group_advantages([1.0], scale_rewards="grouped")


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_group_advantages_match_trl_on_a_batch_with_unscorable_rollouts(scale_rewards):
    totals = [1.0, 0.3, NAN, 0.0, 0.7, 0.7, 0.7, 0.7, 2.5, NAN, NAN, NAN, -1.0, 4.0, 0.25, 0.5]
    groups = [totals[i:i + 4] for i in range(0, len(totals), 4)]
    batch_std = nanstd(torch.tensor(totals, dtype=torch.float64)).item()
    ours = [a for g in groups for a in group_advantages(g, scale_rewards=scale_rewards, batch_std=batch_std)]
    # TRL's nanstd takes Bessel's count / (count - 1) in float32 (an int tensor divided):
    # 1.5e-8 relative at most; everything else agrees to float64 rounding.
    assert ours == pytest.approx(trl_advantages(totals, 4, scale_rewards), rel=3e-8, abs=1e-12)


def _row(seq, step, key, *, reward, successes, advantage, unscored=False, facts=True):
    episode = {
        "attributes": {"reward": reward, "tool_successes": successes, "tool_calls": 1.0},
        "components": {}, "completion_tokens": 10, "completion_chars": 40,
    } if facts and not unscored else {}
    return {
        "seq": seq, "step": step, "prompt_key": key, "env": "echo",
        "rewards": {"env_reward": None if unscored else reward},
        "reward": None if unscored else reward, "advantage": advantage,
        "episode": episode, "unscored": unscored,
    }


def _stored_run() -> list[dict]:
    """16 rollouts in 4 groups of 4, the advantages stored as TRL computed them for the
    env_reward recipe. A: the reward went to the one rollout that did not call the tool;
    B: every rollout rewarded (zero variance); C: one unscored rollout; D: two stored before
    rollouts kept their facts."""
    a = group_advantages([1.0, 0.0, 0.0, 0.0], scale_rewards="group")
    rows = [
        _row(1, 1, "a", reward=1.0, successes=0.0, advantage=a[0]),
        _row(2, 1, "a", reward=0.0, successes=1.0, advantage=a[1]),
        _row(3, 1, "a", reward=0.0, successes=1.0, advantage=a[2]),
        _row(4, 1, "a", reward=0.0, successes=1.0, advantage=a[3]),
        *(_row(5 + i, 1, "b", reward=1.0, successes=s, advantage=0.0) for i, s in enumerate([1.0, 1.0, 0.0, 1.0])),
        *(_row(9 + i, 2, "c", reward=0.5, successes=s, advantage=0.0) for i, s in enumerate([1.0, 0.0, 1.0])),
        _row(12, 2, "c", reward=0.0, successes=0.0, advantage=0.0, unscored=True),
    ]
    d = group_advantages([0.2, 0.4, 0.6, 0.8], scale_rewards="group")
    rows += [
        _row(13 + i, 2, "d", reward=r, successes=1.0, advantage=d[i], facts=i >= 2)
        for i, r in enumerate([0.2, 0.4, 0.6, 0.8])
    ]
    return rows


def test_a_new_recipe_flips_the_signs_of_group_a_and_gives_b_and_c_a_signal():
    scorer = Rescorer(NEW, scale_rewards="group", num_generations=4)
    for row in reversed(_stored_run()):  # any order: grouped by (step, prompt_key), seq order
        scorer.add(row)
    report = scorer.report()

    assert report["rollouts"] == 16
    assert report["rescored"] == 11  # A 4 + B 4 + C 3 (its unscored one stays unscored)
    assert report["not_rescored"] == {"total": 5, "no_facts": 2, "unscored": 1, "in_incomplete_groups": 2}
    assert report["groups"] == {"total": 4, "compared": 3, "sizes": [4]}
    # The stored advantages are TRL's: recomputed from the stored totals they match, D included.
    assert report["old_advantage_check"]["compared"] == 16
    assert report["old_advantage_check"]["max_abs_difference"] < 1e-12

    old, new = report["old"], report["new"]
    assert old["total"]["count"] == new["total"]["count"] == 11
    assert old["total"]["mean"] == pytest.approx(6.5 / 11, abs=1e-12)  # A 1, B 4, C 1.5
    assert new["total"]["mean"] == pytest.approx(8 / 11, abs=1e-12)  # A 3, B 3, C 2
    assert (old["zero_variance_groups"], new["zero_variance_groups"]) == (2, 0)  # B and C, then none
    assert old["zero_variance_fraction"] == pytest.approx(2 / 3)
    assert new["zero_variance_fraction"] == 0.0
    assert old["mean_group_std"] == pytest.approx(0.5 / 3, abs=1e-12)
    assert new["mean_group_std"] == pytest.approx((0.5 + 0.5 + math.sqrt(1 / 3)) / 3, abs=1e-12)
    assert old["terms"] == {"env_reward": {"mean": pytest.approx(6.5 / 11, abs=1e-12), "count": 11}}
    assert new["terms"] == {"tool_called": {"mean": pytest.approx(8 / 11, abs=1e-12), "count": 11}}

    changes = report["sign_changes"]
    assert changes["count"] == 4 and (changes["became_zero"], changes["became_nonzero"]) == (0, 7)
    # Biggest swing first: the rewarded rollout of A goes from +1.4997 to -1.4997.
    assert [(c["seq"], c["step"]) for c in changes["shown"]] == [(1, 1), (2, 1), (3, 1), (4, 1)]
    assert changes["shown"][0]["old"] == pytest.approx(0.75 / 0.5001, abs=1e-12)
    assert changes["shown"][0]["new"] == pytest.approx(-0.75 / 0.5001, abs=1e-12)
    assert changes["shown"][1]["new"] == pytest.approx(0.25 / 0.5001, abs=1e-12)

    histogram = report["histogram"]
    assert (len(histogram["edges"]), sum(histogram["old"]), sum(histogram["new"])) == (21, 11, 11)
    assert (histogram["old"][0], histogram["old"][10], histogram["old"][-1]) == (3, 3, 5)  # 0, 0.5, 1
    assert (histogram["new"][0], histogram["new"][-1]) == (3, 8)


def test_a_step_re_run_after_a_resume_is_split_back_into_groups_in_seq_order():
    rows = [
        _row(1, 3, "r", reward=1.0, successes=1.0, advantage=None),
        _row(2, 3, "r", reward=0.0, successes=1.0, advantage=None),
        _row(3, 3, "r", reward=0.0, successes=0.0, advantage=None),  # the re-run's group
        _row(4, 3, "r", reward=0.0, successes=1.0, advantage=None),
    ]
    scorer = Rescorer(NEW, num_generations=2)
    for row in rows:
        scorer.add(row)
    report = scorer.report()
    assert report["groups"] == {"total": 2, "compared": 2, "sizes": [2]}
    assert report["old_advantage_check"] == {"compared": 0, "max_abs_difference": None}
    # Old: (1, 0) spreads, (0, 0) does not; new: (1, 1) does not, (0, 1) spreads.
    assert (report["old"]["zero_variance_groups"], report["new"]["zero_variance_groups"]) == (1, 1)
    assert report["sign_changes"] == {"count": 0, "shown": [], "became_zero": 2, "became_nonzero": 2}


def test_nothing_to_re_score_is_a_clear_error():
    scorer = Rescorer(NEW)
    scorer.add(_row(1, 1, "a", reward=1.0, successes=1.0, advantage=0.0, facts=False))
    scorer.add(_row(2, 1, "a", reward=0.0, successes=1.0, advantage=0.0, unscored=True))
    with pytest.raises(RescoreError) as refused:
        scorer.report()
    assert str(refused.value) == (
        "none of the run's 2 rollouts can be re-scored: 1 were stored before rollouts kept their "
        "episode facts; 1 were unscored (the environment lost the episode)"
    )
    with pytest.raises(RescoreError, match="the run has no stored rollouts to re-score"):
        Rescorer(NEW).report()


def test_a_recipe_limited_to_another_environment_scores_nothing_and_says_so():
    terms = [RewardTerm(name="elsewhere", kind="env_reward", environments=["wordle"])]
    scorer = Rescorer(terms)
    scorer.add(_row(1, 1, "a", reward=1.0, successes=1.0, advantage=0.0))
    with pytest.raises(RescoreError, match="the new recipe's terms apply to none of them"):
        scorer.report()


def test_weight_zero_inner_terms_keep_a_rollout_scorable_as_trl_does():
    """A container limited to another environment is None, but the term below it is still a
    compiled function (weight 0) and scores: TRL's nansum makes the total 0, not NaN."""
    elsewhere = RewardTerm.model_validate({
        "name": "elsewhere", "kind": "weighted_sum", "environments": ["wordle"],
        "terms": [{"name": "called", "kind": "tool_called"}],
    })  # fmt: skip
    scorer = Rescorer([elsewhere])
    scorer.add(_row(1, 1, "a", reward=1.0, successes=1.0, advantage=0.0))
    scorer.add(_row(2, 1, "a", reward=0.0, successes=0.0, advantage=0.0))
    report = scorer.report()
    assert (report["new"]["total"]["mean"], report["new"]["total"]["count"]) == (0.0, 2)
    assert report["new"]["zero_variance_groups"] == 1
    assert report["new"]["terms"] == {"elsewhere": {"mean": None, "count": 0}, "called": {"mean": 0.5, "count": 2}}


def test_overlaid_histogram_shares_its_bins():
    assert overlaid_histogram([0.0, 1.0], [0.5, NAN], bins=2) == {"edges": [0.0, 0.5, 1.0], "old": [1, 1], "new": [0, 1]}
    assert overlaid_histogram([2.0], [2.0, 2.0]) == {"edges": [2.0, 2.0], "old": [1], "new": [2]}
    assert overlaid_histogram([NAN], [NAN]) is None
