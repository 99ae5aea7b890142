"""What an exception that ended training means for the run (worker/training/lifecycle.py): the stored
class of failure that decides whether it may resume, and an outage's interrupted end."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from envs.adapters.base import EnvironmentAtCapacity, ResetRefused
from envs.adapters.outage import EnvironmentUnreachable
from tests.support.errors import raised_from
from worker.training.lifecycle import failure_class, mark_failure, outage_end


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (EnvironmentAtCapacity("refused a session", capacity=2, env_name="echo"), "config"),
        (ResetRefused("environment 'chess' refused the reset (fen='x'): bad FEN"), "config"),
        (MemoryError(), "infrastructure"),
        (raised_from(RuntimeError("step failed"), ConnectionRefusedError(111, "Connection refused")), "infrastructure"),
        (OperationalError("server closed the connection unexpectedly"), "infrastructure"),
        (ValueError("a bug in a reward term"), "error"),
    ],
)
def test_failure_classes(exc, expected):
    assert failure_class(exc) == expected


def test_a_marked_failure_keeps_the_nearest_mark_and_infrastructure_wins():
    exc = OSError("demo:nope is not a valid model identifier")
    mark_failure(exc, "model")
    mark_failure(exc, "config")  # further out: the first mark stays
    assert failure_class(exc) == "model"
    hub_down = raised_from(OSError("could not reach the hub"), ConnectionResetError(104, "Connection reset by peer"))
    mark_failure(hub_down, "model")
    assert failure_class(hub_down) == "infrastructure"


def test_an_outage_ends_the_run_interrupted_with_its_reason():
    gone = EnvironmentUnreachable(
        "environment 'echo' has been unreachable for 301 s (ENVLAB_ENV_OUTAGE_SECONDS is 300): reset failed 40 "
        "time(s), last with ConnectionRefusedError: [Errno 111] Connection refused",
        env_name="echo", seconds=301.0, cause="ConnectionRefusedError: [Errno 111] Connection refused",
    )
    assert outage_end(raised_from(RuntimeError("TRL"), gone), checkpoint_step=15) == (
        "interrupted: environment 'echo' has been unreachable for 301 s (ENVLAB_ENV_OUTAGE_SECONDS is 300): reset "
        "failed 40 time(s), last with ConnectionRefusedError: [Errno 111] Connection refused. Resume continues from "
        "checkpoint step 15 once the environment server answers again."
    )
    assert outage_end(ValueError("no"), checkpoint_step=15) is None
