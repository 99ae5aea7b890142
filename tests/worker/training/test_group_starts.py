"""Reset fingerprints (envs/adapters/base.py) and the groups whose completions started from
different observations (webapp/runs/telemetry/group_starts.py)."""

from __future__ import annotations

from typing import Any

import pytest

from envs.adapters.base import ClipsToolText, clip_tool_text, reset_fingerprint
from envs.adapters.router import router_class
from webapp.runs.telemetry.group_starts import GroupStartMeter, GroupStarts, group_starts


class Dealer(ClipsToolText):
    """Its reset returns what the row's `observation` says (raising where it is an exception)."""

    env_name = "dealer"

    def reset(self, **row: Any) -> Any:
        observation = row.get("observation")
        if isinstance(observation, Exception):
            raise observation
        return observation

    def play(self, move: str) -> str:
        """Play a move.

        Args:
            move: The move.
        """
        return move


def test_every_reset_leaves_the_fingerprint_of_what_it_returned():
    dealer = Dealer()
    assert getattr(dealer, "_reset_fingerprint", "absent") == "absent"

    dealer.reset(observation="\nboard: e4")
    first = dealer._reset_fingerprint
    dealer.reset(observation="\nboard: e4")
    same = dealer._reset_fingerprint
    dealer.reset(observation=None)
    none = dealer._reset_fingerprint
    dealer.reset(observation="None")
    text_none = dealer._reset_fingerprint
    dealer.reset(observation=[{"type": "text", "text": "board: e4"}])
    blocks = dealer._reset_fingerprint

    assert first == same == reset_fingerprint("\nboard: e4")
    assert len(first) == 16 and int(first, 16) >= 0
    assert len({first, none, text_none, blocks}) == 4  # None is a value of its own


def test_a_tool_call_keeps_the_fingerprint_and_a_failed_reset_leaves_none():
    dealer = Dealer()
    dealer.reset(observation="\nstart")
    dealer.play(move="e4")
    assert dealer._reset_fingerprint == reset_fingerprint("\nstart")

    with pytest.raises(RuntimeError):
        dealer.reset(observation=RuntimeError("server down"))

    assert dealer._reset_fingerprint is None


def test_the_fingerprint_is_of_the_clipped_text_trl_receives(settings):
    settings.ENVLAB_MAX_TOOL_TEXT = 10
    dealer = Dealer()

    returned = dealer.reset(observation="x" * 50)

    assert returned == clip_tool_text("x" * 50, 10)
    assert dealer._reset_fingerprint == reset_fingerprint(returned)


def test_a_router_reads_the_fingerprint_of_the_episodes_own_adapter():
    class Other(Dealer):
        env_name = "other"

    router = router_class({"dealer": Dealer, "other": Other})()

    router.reset(env="dealer", observation="\nfirst")
    on_dealer = router._reset_fingerprint
    router.reset(env="other", observation="\nsecond")
    on_other = router._reset_fingerprint

    assert (on_dealer, on_other) == (reset_fingerprint("\nfirst"), reset_fingerprint("\nsecond"))
    assert router._instances["dealer"]._reset_fingerprint == reset_fingerprint("\nfirst")
    assert "_reset_fingerprint" not in vars(router)


def rows(env: str, *prints: str | None) -> list[dict[str, Any]]:
    return [{"env": env, "reset_fingerprint": p} for p in prints]


def test_groups_are_runs_of_num_generations_rows_and_mismatch_by_environment():
    batch = (
        rows("chess", "a", "a")  # alike
        + rows("chess", "b", "c")  # mismatched
        + rows("finqa", "d", "e")  # mismatched
        + rows("finqa", "f", "f")
    )

    starts = group_starts(batch, 2)

    assert (dict(starts.checked), dict(starts.mismatched)) == ({"chess": 2, "finqa": 2}, {"chess": 1, "finqa": 1})
    assert starts.metrics() == {"group_mismatch": 2.0, "group_mismatch_frac": 0.5}
    # With groups of 4 the same rows are two groups, both mismatched.
    assert dict(group_starts(batch, 4).mismatched) == {"chess": 1, "finqa": 1}


def test_rollouts_without_a_fingerprint_are_left_out_of_their_group():
    batch = rows("echo", "a", None, "b") + rows("echo", "a", None, None) + rows("echo", None, None, None)

    starts = group_starts(batch, 3)

    # The second group has one fingerprint, the third none: only the first is checked.
    assert (dict(starts.checked), dict(starts.mismatched)) == ({"echo": 1}, {"echo": 1})
    assert group_starts(rows("echo", None, None), 2).metrics() == {}


@pytest.mark.parametrize(("batch", "num_generations"), [
    (rows("echo", "a", "b", "c"), 2),  # not whole groups: not TRL's grouping
    (rows("echo", "a", "b"), 1),  # nothing to compare
    ([], 2),
])
def test_nothing_is_checked_without_whole_groups_of_two_or_more(batch, num_generations):
    starts = group_starts(batch, num_generations)

    assert (starts.checked_total, starts.metrics()) == (0, {})


def test_the_meter_sums_a_steps_batches_and_starts_afresh_after_a_take():
    meter = GroupStartMeter()
    assert meter.take() is None

    meter.add(group_starts(rows("chess", "a", "b"), 2))
    meter.add(group_starts(rows("chess", "c", "c"), 2))
    taken = meter.take()

    assert taken == GroupStarts(checked={"chess": 2}, mismatched={"chess": 1})  # type: ignore[arg-type]
    assert meter.take() is None
