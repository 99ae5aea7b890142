"""Issue 23 item 7: an ORS session idle past the spec's expiry (15 minutes without a ping)
during a slow step is kept alive, and its episode goes on. A real ORS server (the bundled
one, uvicorn) runs its session clock 60 times fast (tests/support/fast_clock_ors.py), so 25 s
of idling is 25 minutes to it; the SDK's keep-alive ping (every 10 s, through the lab's
guarded connector, envs/adapters/ors_limits.py) is what keeps the session. The second test is
the control: with the ping held back, the same idling loses the session."""

from __future__ import annotations

import concurrent.futures
import sys
import time
from collections.abc import Iterator

import pytest
from openreward.api._session import ping

from envs.adapters.base import EpisodeLost
from envs.adapters.ors import ors_adapter_class
from envs.ors.tasks import ECHO_TASKS
from tests.envs.servers import free_port, run_server_command

IDLE_SECONDS = 25  # 1 500 s of the server's clock: past its 900 s expiry


@pytest.fixture(scope="module")
def fast_ors() -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "uvicorn", "tests.support.fast_clock_ors:app",
               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    env = {"OPENREWARD_DISABLE_UPDATE_CHECK": "1", "ENVLAB_ORS_CLOCK_FACTOR": "60"}
    with run_server_command(command, url, env, startup_timeout=60):
        yield url


def test_an_episode_idle_past_the_session_expiry_is_kept_by_the_ping(fast_ors, opened) -> None:
    adapter = opened(ors_adapter_class(base_url=fast_ors, env_name="echo"))
    adapter.reset(task_index=2)
    time.sleep(IDLE_SECONDS)  # a slow generation step: no call on the session
    phrase = ECHO_TASKS["train"][2]["phrase"]
    assert adapter.echo(phrase) == phrase
    assert (adapter.lost, adapter.done, adapter.reward) == (False, True, 1.0)


def test_without_the_ping_the_server_reaps_the_idle_session(fast_ors, opened, monkeypatch) -> None:
    # The SDK schedules its ping loop on its own thread; a future that never runs is no ping.
    monkeypatch.setattr(ping.ping_thread, "schedule", lambda *args, **kwargs: concurrent.futures.Future())
    adapter = opened(ors_adapter_class(base_url=fast_ors, env_name="echo"))
    adapter.reset(task_index=2)
    time.sleep(IDLE_SECONDS)
    with pytest.raises(EpisodeLost):
        adapter.echo(ECHO_TASKS["train"][2]["phrase"])
    assert adapter.lost
