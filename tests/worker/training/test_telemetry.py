"""The telemetry sink against the real database and the real Redis channel layer."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from webapp.runs.models import MetricPoint, Rollout, Run
from webapp.runs.telemetry.live import run_group
from webapp.runs.telemetry.metric_keys import WALL_TIME_KEY
from webapp.runs.telemetry.record import telemetry_record
from worker.training.telemetry import TelemetrySink

pytestmark = pytest.mark.django_db(transaction=True)


def _listen(run_id: int):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group(run_id), channel)
    return layer, channel


def _receive_all(layer, channel, count: int) -> list[dict]:
    return [async_to_sync(layer.receive)(channel)["payload"] for _ in range(count)]


def test_events_are_stored_in_order_then_announced(claimed_run):
    layer, channel = _listen(claimed_run.pk)
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)
    sink.metrics(1, {"reward": 0.5, "loss": 1.25, "bad": float("nan"), "text": "x"})
    sink.rollouts(
        [
            {
                "step": 1,
                "env": "echo",
                "messages": [{"role": "assistant", "content": "<b>hi</b>"}],
                "rewards": {"env_reward": 1.0},
                "reward": 1.0,
                "advantage": 0.5,
            }
        ]
    )
    sink.step_done(1)
    sink.metrics(2, {"reward": 0.75})
    sink.checkpoint(2)
    assert sink.close(timeout=10) is True

    logged_at = dict(
        MetricPoint.objects.filter(run=claimed_run, key=WALL_TIME_KEY).values_list("step", "value")
    )
    assert set(logged_at) == {1, 2} and all(abs(time.time() - t) < 60 for t in logged_at.values())
    rows = list(
        MetricPoint.objects.filter(run=claimed_run)
        .exclude(key=WALL_TIME_KEY)
        .order_by("seq", "key")
        .values_list("seq", "step", "key", "value")
    )
    assert rows[0][1:] == (1, "loss", 1.25)
    assert [r[1:] for r in rows] == [(1, "loss", 1.25), (1, "reward", 0.5), (2, "reward", 0.75)]
    rollout = Rollout.objects.get(run=claimed_run)
    assert (rollout.step, rollout.env, rollout.rewards, rollout.reward, rollout.advantage) == (
        1,
        "echo",
        {"env_reward": 1.0},
        1.0,
        0.5,
    )
    assert rollout.messages == [{"role": "assistant", "content": "<b>hi</b>"}]
    claimed_run.refresh_from_db()
    assert (claimed_run.last_seq, claimed_run.step, claimed_run.checkpoint_step) == (3, 2, 2)
    seqs = sorted({r[0] for r in rows} | {rollout.seq})
    assert seqs == [1, 2, 3]

    notes = _receive_all(layer, channel, 3)
    notes.sort(key=lambda n: n["seq"])
    assert notes[0] == {
        "type": "metrics",
        "seq": 1,
        "step": 1,
        "values": {"reward": 0.5, "loss": 1.25, WALL_TIME_KEY: logged_at[1]},
    }
    assert notes[1] == {"type": "rollouts", "seq": 2, "first_seq": 2, "count": 1, "step": 1}
    assert rollout.seq == 2
    assert notes[2] == {"type": "metrics", "seq": 3, "step": 2, "values": {"reward": 0.75, WALL_TIME_KEY: logged_at[2]}}


def test_a_failing_database_write_is_retried_without_losing_events(claimed_run, monkeypatch):
    # Simulated outage: the first two writes raise as a lost database connection would.
    import webapp.runs.telemetry.record as telemetry

    real = telemetry.telemetry_record
    failures = {"left": 2}

    def flaky(**kwargs):
        if failures["left"]:
            failures["left"] -= 1
            raise ConnectionError("database went away")
        return real(**kwargs)

    monkeypatch.setattr(telemetry, "telemetry_record", flaky)
    sink = TelemetrySink(
        run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.1, publish=False
    )
    for step in range(1, 6):
        sink.metrics(step, {"reward": step / 10})
    assert sink.close(timeout=20) is True
    assert sink.stats["db_errors"] == 2
    steps = list(
        MetricPoint.objects.filter(run=claimed_run, key="reward")
        .order_by("step")
        .values_list("step", flat=True)
    )
    assert steps == [1, 2, 3, 4, 5]


def test_a_write_that_committed_with_its_answer_lost_is_retried_and_stored_once(claimed_run, monkeypatch):
    # Simulated: the connection drops after the commit, before its answer reaches the worker (a
    # network fault that cannot be timed for real here). The write itself is real.
    from django.db import OperationalError

    import webapp.runs.telemetry.record as telemetry

    real = telemetry.telemetry_record
    lost = {"left": 1}

    def answer_lost(**kwargs):
        notes = real(**kwargs)
        if lost["left"]:
            lost["left"] -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return notes

    monkeypatch.setattr(telemetry, "telemetry_record", answer_lost)
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.1, publish=False)
    sink.rollouts([{"step": 1, "env": "echo", "messages": [], "rewards": {}, "reward": float(i)} for i in range(4)])
    sink.metrics(1, {"reward": 1.5})
    sink.metrics(2, {"reward": 2.5})
    assert sink.close(timeout=20) is True

    assert sink.stats["db_errors"] == 1
    assert list(Rollout.objects.filter(run=claimed_run).order_by("seq").values_list("seq", "reward")) == [
        (1, 0.0), (2, 1.0), (3, 2.0), (4, 3.0),
    ]
    assert list(
        MetricPoint.objects.filter(run=claimed_run, key="reward").order_by("step").values_list("step", "value", "seq")
    ) == [(1, 1.5, 5), (2, 2.5, 6)]
    assert Run.objects.get(pk=claimed_run.pk).last_seq == 6


def test_a_chunk_sent_again_is_not_stored_again(claimed_run):
    from webapp.runs.telemetry.record import telemetry_record

    events = [("rollouts", [{"step": 1, "env": "echo", "reward": 1.0}]), ("metrics", (1, {"reward": 1.0}))]
    first = telemetry_record(run_id=claimed_run.pk, lease_owner="lease-a", events=events, chunk="s:1")
    again = telemetry_record(run_id=claimed_run.pk, lease_owner="lease-a", events=events, chunk="s:1")
    other = telemetry_record(run_id=claimed_run.pk, lease_owner="lease-a", events=events[1:], chunk="s:2")

    assert [n["seq"] for n in first] == [1, 2] and again == [] and [n["seq"] for n in other] == [3]
    assert list(Rollout.objects.filter(run=claimed_run).values_list("seq", flat=True)) == [1]
    assert list(MetricPoint.objects.filter(run=claimed_run).values_list("step", "seq")) == [(1, 3)]
    assert Run.objects.get(pk=claimed_run.pk).telemetry_chunk == "s:2"


def test_cancel_and_lost_lease_reach_the_training_loop(claimed_run):
    sink = TelemetrySink(
        run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.1, publish=False
    )
    Run.objects.filter(pk=claimed_run.pk).update(cancel_requested=True)
    assert sink.cancel_requested.wait(5)
    Run.objects.filter(pk=claimed_run.pk).update(lease_owner="someone-else")
    assert sink.lease_lost.wait(5)
    sink.close(timeout=5)


def test_nul_characters_in_model_text_are_stored_and_nothing_after_is_held_back(claimed_run):
    # PostgreSQL refuses NUL in text and JSON; a tiny model's output can contain one.
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)
    sink.rollouts([{"step": 1, "env": "echo\x00", "messages": [{"role": "assistant", "content": "a\x00b"}],
                    "rewards": {"env_reward": 0.0}, "reward": 0.0}])
    sink.metrics(1, {"reward": 0.0})
    sink.metrics(2, {"reward": 1.0})
    assert sink.close(timeout=10) is True
    rollout = Rollout.objects.get(run=claimed_run)
    assert (rollout.env, rollout.messages) == ("echo\ufffd", [{"role": "assistant", "content": "a\ufffdb"}])
    assert list(MetricPoint.objects.filter(run=claimed_run).exclude(key=WALL_TIME_KEY).order_by("step").values_list("step", "value")) == [
        (1, 0.0), (2, 1.0),
    ]
    assert sink.stats["db_errors"] == 0


def test_an_event_the_database_refuses_is_dropped_alone(claimed_run):
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)
    good = {"env": "echo", "messages": [], "rewards": {}, "reward": 0.5}
    sink.rollouts([{**good, "step": 1}, {**good, "step": -1}, {**good, "step": 1, "reward": 0.25}])
    sink.metrics(1, {"reward": 0.5})
    sink.checkpoint(1)
    sink.metrics(2, {"reward": 0.75})
    assert sink.close(timeout=20) is True
    assert list(Rollout.objects.filter(run=claimed_run).values_list("step", "reward")) == [(1, 0.5), (1, 0.25)]
    assert list(MetricPoint.objects.filter(run=claimed_run).exclude(key=WALL_TIME_KEY).order_by("step").values_list("step", "value")) == [
        (1, 0.5), (2, 0.75),
    ]
    claimed_run.refresh_from_db()
    assert claimed_run.checkpoint_step == 1
    assert (sink.stats["db_errors"] >= 1, sink.stats["dropped_events"]) == (True, 1)


def test_a_rollout_keeps_its_seed_prompt_key_and_scored_episode_with_bad_values_dropped(claimed_run):
    from webapp.runs.models import prompt_key

    prompt = [{"role": "user", "content": "Play."}]
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)
    sink.rollouts([
        {
            "step": 1, "env": "catch", "seed": 17, "prompt": prompt, "messages": [], "rewards": {"r": 1.0},
            "episode": {
                "attributes": {"won": 1.0, "bad": float("nan"), "text": "x", "big": float("inf")},
                "components": {"calls": {"sum": 2.0, "odd": "y"}, "junk": 3},
                "completion_tokens": 12, "completion_chars": -1,
            },
        },
        {"step": 1, "env": "catch", "seed": 2**70, "prompt": prompt, "messages": [], "episode": "not a dict"},
    ])
    assert sink.close(timeout=10) is True
    first, second = Rollout.objects.filter(run=claimed_run).order_by("seq")
    assert first.seed == 17 and first.prompt_key == prompt_key("catch", prompt, 17)
    assert first.episode == {
        "attributes": {"won": 1.0}, "components": {"calls": {"sum": 2.0}},
        "completion_tokens": 12, "completion_chars": None,
    }
    # A seed no database column holds is dropped, not stored wrong; the episode is empty.
    assert second.seed is None and second.episode == {} and second.prompt_key == prompt_key("catch", prompt, None)


def test_async_trainer_metric_spellings_are_stored_under_grpos_names(claimed_run):
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)
    sink.metrics(1, {"rewards/outcome": 0.5, "rollout/generated_tok_s": 99.0, "sample/staleness_mean": 1.0})
    # Both spellings in one log: GRPO's value stands, whichever came first.
    sink.metrics(2, {"rewards/outcome/mean": 0.75, "rewards/outcome": 0.1})
    sink.metrics(3, {"rewards/outcome": 0.2, "rewards/outcome/mean": 0.8})
    assert sink.close(timeout=10) is True
    stored = {
        (p.step, p.key): p.value
        for p in MetricPoint.objects.filter(run=claimed_run).exclude(key=WALL_TIME_KEY)
    }
    assert stored == {
        (1, "rewards/outcome/mean"): 0.5, (1, "perf/generated_tokens_per_s"): 99.0, (1, "sample/staleness_mean"): 1.0,
        (2, "rewards/outcome/mean"): 0.75, (3, "rewards/outcome/mean"): 0.8,
    }


def test_a_steps_mismatched_groups_are_stored_as_its_metrics_and_raise_the_alert(claimed_run):
    from types import SimpleNamespace

    from webapp.runs.config import AlertSettings
    from webapp.runs.models import RunEvent
    from webapp.runs.telemetry.group_starts import group_starts
    from webapp.runs.telemetry.health import HealthMonitor
    from webapp.runs.telemetry.series import run_metric_keys
    from worker.training.runner import TelemetryCallback

    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)
    callback = TelemetryCallback(sink, HealthMonitor(AlertSettings()))
    control = SimpleNamespace(should_save=False, should_training_stop=False)
    # What the trainer adds from a generation batch of step 1: two groups of two, one mismatched.
    callback.starts.add(group_starts([
        {"env": "draw", "reset_fingerprint": "a"}, {"env": "draw", "reset_fingerprint": "b"},
        {"env": "draw", "reset_fingerprint": "c"}, {"env": "draw", "reset_fingerprint": "c"},
    ], 2))

    callback.on_log(None, SimpleNamespace(global_step=1), control, logs={"loss": 0.5})
    callback.on_log(None, SimpleNamespace(global_step=2), control, logs={"loss": 0.4})  # generated nothing

    assert sink.close(timeout=10) is True
    stored = {
        (p.step, p.key): p.value
        for p in MetricPoint.objects.filter(run=claimed_run).exclude(key=WALL_TIME_KEY)
    }
    assert stored == {
        (1, "loss"): 0.5, (1, "group_mismatch"): 1.0, (1, "group_mismatch_frac"): 0.5, (2, "loss"): 0.4,
    }
    assert {"group_mismatch", "group_mismatch_frac"} <= set(run_metric_keys(run=claimed_run))
    assert list(RunEvent.objects.filter(run=claimed_run, kind="alert").values_list("data", "message")) == [(
        {"alert": "group_mismatch", "step": 1, "active": True},
        "environment 'draw': its reset ignores the seed: GRPO's advantages compare different starts (1 of 2 groups "
        "at step 1 started from different observations); fix the start with the environment's reset options, or "
        "make the server's reset honour the seed.",
    )]
    assert (control.should_save, control.should_training_stop) == (False, False)


def test_a_rollouts_reset_fingerprint_is_not_stored_and_changes_nothing_else(claimed_run):
    from webapp.runs.models import prompt_key

    prompt = [{"role": "user", "content": "Draw.\ncard: 6 of spades"}]
    row = {"step": 1, "env": "draw", "seed": 7, "prompt": prompt, "messages": [], "rewards": {"r": 1.0}, "reward": 1.0}
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)

    sink.rollouts([{**row, "reset_fingerprint": "7875da79d2fd6d96"}, row])

    assert sink.close(timeout=10) is True
    stored = list(
        Rollout.objects.filter(run=claimed_run).order_by("seq")
        .values("env", "seed", "prompt_key", "prompt", "rewards", "reward", "episode", "unscored")
    )
    expected = {
        "env": "draw", "seed": 7, "prompt_key": prompt_key("draw", prompt, 7), "prompt": prompt,
        "rewards": {"r": 1.0}, "reward": 1.0, "episode": {}, "unscored": False,
    }
    assert stored == [expected, expected]


def test_metric_tiers_are_kept_up_as_steps_are_written_so_the_first_read_makes_none(claimed_run):
    from webapp.runs.models import MetricTier, MetricTierMark
    from webapp.runs.telemetry.series import run_metric_series

    Run.objects.filter(pk=claimed_run.pk).update(max_steps=1000)
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)
    for step in range(1, 301):
        sink.metrics(step, {"loss": (step * 7919) % 1009 / 1009, "reward": step / 300})
        sink.step_done(step)
        if step % 7 == 0:
            time.sleep(0.01)  # let the flusher take a few steps at a time, as in a run
    assert sink.close(timeout=20) is True

    # Kept up by the flusher, with no read: both keys to their newest complete block.
    marks = dict(MetricTierMark.objects.filter(run=claimed_run).values_list("key", "through_step"))
    assert marks == {"loss": 288, "reward": 288, WALL_TIME_KEY: 288}
    made = sorted(MetricTier.objects.filter(run=claimed_run).values_list("key", "width", "start", "min_step", "max_step"))
    assert sink.stats["tier_seconds"] > 0

    series = run_metric_series(run=Run.objects.get(pk=claimed_run.pk), keys=["loss", "reward"], max_points=40)

    # The read found them made (nothing added or replaced), and agrees with a read that
    # makes them itself from the same points.
    assert sorted(MetricTier.objects.filter(run=claimed_run).values_list("key", "width", "start", "min_step", "max_step")) == made
    MetricTier.objects.filter(run=claimed_run).delete()
    MetricTierMark.objects.filter(run=claimed_run).delete()
    assert run_metric_series(run=Run.objects.get(pk=claimed_run.pk), keys=["loss", "reward"], max_points=40) == series
    assert sorted(MetricTier.objects.filter(run=claimed_run).values_list("key", "width", "start", "min_step", "max_step")) == [
        row for row in made if row[0] != WALL_TIME_KEY  # the read made only the keys it read
    ]


def test_a_backlog_that_logs_one_step_twice_is_stored_in_one_write_with_the_later_values(claimed_run):
    """After a database outage the backlog goes in one write, and it may hold one step twice
    (TRL logs its end-of-training summary at the last step): PostgreSQL refused the upsert
    ("ON CONFLICT DO UPDATE command cannot affect row a second time") and the writer retried
    it forever, as if the database were still away."""
    notes = telemetry_record(
        run_id=claimed_run.pk, lease_owner="lease-a", chunk="c:1",
        events=[("metrics", (1, {"loss": 0.5})), ("metrics", (2, {"loss": 0.25})),
                ("metrics", (2, {"loss": 0.2, "train_runtime": 9.0}))],
    )

    stored = list(MetricPoint.objects.filter(run=claimed_run).order_by("step", "key").values_list("step", "key", "value", "seq"))
    assert stored == [(1, "loss", 0.5, 1), (2, "loss", 0.2, 3), (2, "train_runtime", 9.0, 3)]
    assert [n["seq"] for n in notes] == [1, 2, 3]


def test_sampled_values_go_to_the_last_step_done_and_leave_its_wall_time_alone(claimed_run):
    """System metrics (worker/training/system_metrics.py) land beside the step's own metrics."""
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)
    sink.sampled({"system/rss_gib": 1.5})  # before any step: step 0
    sink.metrics(1, {"loss": 0.5})
    sink.step_done(1)
    sink.sampled({"system/rss_gib": 1.75, "system/cpu_percent": 180.0})
    sink.sampled({})
    assert sink.close(timeout=10) is True

    stored = list(
        MetricPoint.objects.filter(run=claimed_run).exclude(key=WALL_TIME_KEY)
        .order_by("step", "key").values_list("step", "key", "value")
    )
    assert stored == [
        (0, "system/rss_gib", 1.5), (1, "loss", 0.5), (1, "system/cpu_percent", 180.0), (1, "system/rss_gib", 1.75),
    ]
    assert list(MetricPoint.objects.filter(run=claimed_run, key=WALL_TIME_KEY).values_list("step", flat=True)) == [1]
    claimed_run.refresh_from_db()
    assert (claimed_run.last_seq, claimed_run.step) == (3, 1)


def test_metric_keys_longer_than_the_column_stay_apart_and_an_event_names_them(claimed_run):
    from webapp.runs.models import RunEvent
    from webapp.runs.telemetry.metric_keys import MAX_METRIC_KEY, stored_metric_key
    from webapp.runs.telemetry.record import METRIC_KEY_SHORTENED

    prefix = "rewards/" + "very_long_reward_term_name_" * 5  # 143 characters
    first, second = f"{prefix}a/mean", f"{prefix}b/mean"
    exact = "m" * MAX_METRIC_KEY
    async_spelling = "rewards/" + "t" * 110  # GRPO's name adds "/mean": 123 characters
    sink = TelemetrySink(run_id=claimed_run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)
    sink.metrics(1, {first: 1.0, second: 2.0, exact: 3.0, async_spelling: 4.0})
    sink.metrics(2, {first: 5.0, second: 6.0})
    assert sink.close(timeout=10) is True
    stored = {
        (p.step, p.key): p.value
        for p in MetricPoint.objects.filter(run=claimed_run).exclude(key=WALL_TIME_KEY)
    }
    short = {name: stored_metric_key(name) for name in (first, second, f"{async_spelling}/mean")}
    assert len(set(short.values())) == 3 and all(len(key) == MAX_METRIC_KEY for key in short.values())
    assert short[first].startswith(first[:100]) and short[first] != short[second]
    assert stored == {
        (1, short[first]): 1.0, (1, short[second]): 2.0, (1, exact): 3.0, (1, short[f"{async_spelling}/mean"]): 4.0,
        (2, short[first]): 5.0, (2, short[second]): 6.0,
    }
    # One event per long name, the first time it is logged: the full name and its stored key.
    events = RunEvent.objects.filter(run=claimed_run, kind=METRIC_KEY_SHORTENED).order_by("data__key")
    assert sorted((e.data["name"], e.data["key"]) for e in events) == sorted((n, k) for n, k in short.items())
    assert all(f"metric '{e.data['name']}'" in e.message and e.data["key"] in e.message for e in events)
