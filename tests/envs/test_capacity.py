"""The words of a session limit (envs/capacity.py and the adapters' refusal message): singular
and plural, the limit read from openenv's own refusal, no advice that cannot work."""

from __future__ import annotations

import pickle

import pytest

from envs.adapters import adapter_class
from envs.adapters.base import EnvironmentAtCapacity, OpenEnvAdapter, capacity_message
from envs.capacity import (
    batch_advice,
    refused_capacity,
    row_reads_max_concurrent_envs,
    sessions,
    shortfall_advice,
)
from tests.envs.wire import CAPACITY_ERROR

SERVER_FIX = (
    "make the server take more: mark its environment class concurrency-safe "
    "(SUPPORTS_CONCURRENT_SESSIONS = True) and pass max_concurrent_envs to create_app, "
    "then measure its capacity again"
)


def _generic(**bound: object) -> type:
    """A third-party server's adapter as the worker binds it (generic: it reads no MAX_CONCURRENT_ENVS)."""
    return type("Bound", (OpenEnvAdapter,), {"catalog_name": "chess", "base_url": "http://chess:8000", **bound})


@pytest.mark.parametrize(
    ("count", "words"),
    [(1, "1 concurrent session"), (2, "2 concurrent sessions"), (0, "0 concurrent sessions"),
     (None, "an unknown number of concurrent sessions")],
)
def test_sessions_are_counted_in_words(count, words):
    assert sessions(count) == words


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        (CAPACITY_ERROR, 2),
        ("Server error: Server at capacity: 7/64 sessions active. Cannot accept new connections. "
         "(code: CAPACITY_REACHED)", 64),
        ("{'code': -32000, 'data': {'active_sessions': 3, 'max_sessions': 3}}", 3),
        ("Server error: we are full (code: CAPACITY_REACHED)", None),
    ],
)
def test_the_limit_is_read_from_the_servers_refusal(text, limit):
    assert refused_capacity(text) == limit


@pytest.mark.parametrize(
    ("capacity", "num_generations", "processes", "advice"),
    [
        (12, 4, 1, ("lower per_device_train_batch_size x gradient_accumulation_steps to 12 "
                    "(a multiple of num_generations, 4)", True)),
        (6, 4, 1, ("lower per_device_train_batch_size x gradient_accumulation_steps to 4 "
                   "(a multiple of num_generations, 4)", True)),
        (3, 4, 1, ("lower num_generations and per_device_train_batch_size x gradient_accumulation_steps to 3 "
                   "(with num_generations 4 the smallest generation batch is 4 rollouts)", True)),
        # Below two sessions no batch fits: GRPO needs num_generations >= 2.
        (1, 4, 1, ("a smaller batch cannot fit: num_generations is at least 2, so the smallest generation "
                   "batch is 2 rollouts", False)),
        (1, None, 1, ("a smaller batch cannot fit: num_generations is at least 2, so the smallest generation "
                      "batch is 2 rollouts", False)),
        (5, None, 1, ("lower per_device_train_batch_size x gradient_accumulation_steps to 5 or less "
                      "(a multiple of num_generations)", True)),
        (9, 2, 2, ("lower per_device_train_batch_size x gradient_accumulation_steps to 4 (a multiple of "
                   "num_generations, 2), for each of the 2 processes sharing the server", True)),
        (3, 2, 2, ("train with fewer processes: each of the 2 needs at least 2 sessions "
                   "(num_generations is at least 2)", True)),
    ],
)
def test_batch_advice_never_goes_below_num_generations(capacity, num_generations, processes, advice):
    assert batch_advice(capacity=capacity, num_generations=num_generations, processes=processes) == advice


def test_only_a_bundled_server_is_told_about_max_concurrent_envs():
    assert shortfall_advice(capacity=1, num_generations=2, reads_max_concurrent_envs=False) == (
        f"a smaller batch cannot fit: num_generations is at least 2, so the smallest generation batch is "
        f"2 rollouts; {SERVER_FIX}"
    )
    assert shortfall_advice(capacity=4, num_generations=2, reads_max_concurrent_envs=True) == (
        "lower per_device_train_batch_size x gradient_accumulation_steps to 4 (a multiple of num_generations, 2), "
        "or restart the server with a larger MAX_CONCURRENT_ENVS, then measure its capacity again"
    )
    # Which rows are bundled OpenEnv servers: the stored adapter decision, or envlab_setup's mark.
    assert row_reads_max_concurrent_envs(kind="openenv", metadata={"style": "bundled", "adapter": "echo"})
    assert row_reads_max_concurrent_envs(kind="openenv", metadata={"bundled": "mcpdemo", "style": "mcp"})
    assert not row_reads_max_concurrent_envs(kind="openenv", metadata={"style": "classic", "name": "echo"})
    assert not row_reads_max_concurrent_envs(kind="ors", metadata={"bundled": "ors"})
    assert not row_reads_max_concurrent_envs(kind="openenv", metadata=None)


def test_a_refusal_of_a_one_session_server_names_the_fixes_that_work():
    message = capacity_message(_generic(capacity=None, batch_size=4), learned=1)
    assert message == (
        "Environment 'chess' at http://chess:8000 refused a session (CAPACITY_REACHED): it takes 1 concurrent "
        "session, and the generation batch of 4 rollouts needs one each. A smaller batch cannot fit: "
        "num_generations is at least 2, so the smallest generation batch is 2 rollouts; " + SERVER_FIX + "."
    )
    assert "MAX_CONCURRENT_ENVS" not in message and "envs.adapters" not in message


def test_a_refusal_with_the_batch_within_the_limit_says_others_held_the_sessions():
    message = capacity_message(_generic(capacity=64, batch_size=4), learned=8)
    assert message == (
        "Environment 'chess' at http://chess:8000 refused a session (CAPACITY_REACHED): it takes 8 concurrent "
        "sessions, and all were in use: the generation batch of 4 rollouts needs 4, so others held the rest. "
        f"Train when they are done, or {SERVER_FIX}."
    )


def test_a_refusal_that_does_not_state_the_limit_uses_the_declared_one_or_says_unknown():
    assert capacity_message(_generic(capacity=2, batch_size=4)) == (
        "Environment 'chess' at http://chess:8000 refused a session (CAPACITY_REACHED): it takes 2 concurrent "
        "sessions, and the generation batch of 4 rollouts needs one each. Lower per_device_train_batch_size x "
        f"gradient_accumulation_steps to 2 or less (a multiple of num_generations), or {SERVER_FIX}."
    )
    assert capacity_message(_generic(capacity=None, batch_size=None)) == (
        "Environment 'chess' at http://chess:8000 refused a session (CAPACITY_REACHED): it takes an unknown "
        "number of concurrent sessions, and the generation batch needs one each. Lower "
        f"per_device_train_batch_size x gradient_accumulation_steps, or {SERVER_FIX}."
    )


def test_a_bundled_servers_refusal_advises_max_concurrent_envs():
    echo = adapter_class(metadata_name="echo", base_url="http://echo:8101", env_name="echo")
    bound = type("Bound", (echo,), {"batch_size": 8})
    assert capacity_message(bound, learned=4).endswith(
        "Lower per_device_train_batch_size x gradient_accumulation_steps to 4 or less (a multiple of "
        "num_generations), or restart the server with a larger MAX_CONCURRENT_ENVS, then measure its "
        "capacity again."
    )


def test_the_refusal_keeps_its_limit_and_environment_through_pickling():
    # TRL and accelerate may carry an exception across processes.
    refusal = pickle.loads(pickle.dumps(EnvironmentAtCapacity("full", capacity=3, env_name="chess")))
    assert (str(refusal), refusal.capacity, refusal.env_name) == ("full", 3, "chess")
