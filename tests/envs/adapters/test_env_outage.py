"""Environment servers that go away: resets retried with backoff on a fresh session, tool calls
on a killed server lost (unscored), the outage clock and its limit, and real answers (4xx) never
retried. Real uvicorn servers, SIGKILLed and started again on the same port; no mocks."""

from __future__ import annotations

import random
import threading
import time
import urllib.error
import urllib.request

import pytest

from envs.adapters import adapter_class, outage
from envs.adapters.base import EpisodeLost
from tests.support.env_process import EnvServerProcess
from tests.support.errors import raised_from
from tests.support.ports import free_port


@pytest.fixture(autouse=True)
def fresh_clock():
    outage.CLOCK.clear()
    yield
    outage.CLOCK.clear()


@pytest.fixture
def training():
    """As while a run trains (worker/training/lifecycle.py outage_alerts): calls wait out an outage."""
    with outage.CLOCK.waiting():
        yield


def _echo(url: str, name: str = "echo-outage"):
    return adapter_class(metadata_name="echo", base_url=url, env_name=name)()


def _heard() -> tuple[list[tuple[str, bool, str]], object]:
    heard: list[tuple[str, bool, str]] = []
    unsubscribe = outage.CLOCK.subscribe(lambda env, up, message: heard.append((env, up, message)))
    return heard, unsubscribe


def test_reset_waits_for_a_killed_server_to_come_back_and_plays_a_fresh_episode(training):
    with EnvServerProcess() as server:
        adapter = _echo(server.url)
        adapter.reset(target="hello")
        assert adapter.echo(message="hello") == "hello"
        server.kill()
        heard, unsubscribe = _heard()
        # The supervisor's part: the server is back on the same port about 2 s later.
        restarter = threading.Timer(2.0, server.start)
        restarter.start()
        started = time.monotonic()
        try:
            adapter.reset(target="world")
            waited = time.monotonic() - started
        finally:
            restarter.join()
            unsubscribe()  # type: ignore[operator]
        assert adapter.echo(message="world") == "world"
        assert adapter.reward == 1.0 and adapter.lost is False
    assert 2.0 <= waited < 2.0 + outage.MAX_DELAY_S + 5, waited
    assert [(env, up) for env, up, _ in heard] == [("echo-outage", False), ("echo-outage", True)]
    assert heard[0][2].startswith("environment 'echo-outage' is unreachable (ConnectionError: Failed to connect") and "[Errno 111]" in heard[0][2]
    assert heard[1][2].startswith("environment 'echo-outage' is reachable again after ")
    assert outage.CLOCK.down_for("echo-outage") is None


def test_a_tool_call_on_a_killed_server_loses_the_episode_and_starts_the_outage_clock(training):
    with EnvServerProcess() as server:
        adapter = _echo(server.url)
        adapter.reset(target="hello")
        server.kill()
        with pytest.raises(EpisodeLost):
            adapter.echo(message="hello")
        assert adapter.lost is True
        assert adapter.lost_reason.startswith("step failed: the environment server was unreachable (")
        assert adapter.tool_failures == 1
        down = outage.CLOCK.down_for("echo-outage")
        assert down is not None and down >= 0
        with pytest.raises(EpisodeLost):
            adapter.echo(message="hello")  # no later step of that episode either
        server.start()
        adapter.reset(target="again")  # a fresh session: the outage is over
        assert outage.CLOCK.down_for("echo-outage") is None
        assert adapter.echo(message="again") == "again"
        assert adapter.lost is False


def test_an_outage_past_the_limit_raises_environment_unreachable(settings, training):
    settings.ENVLAB_ENV_OUTAGE_SECONDS = 1.5
    adapter = _echo(f"http://127.0.0.1:{free_port()}", name="echo-gone")  # nothing listens there
    started = time.monotonic()
    with pytest.raises(outage.EnvironmentUnreachable) as raised:
        adapter.reset(target="hello")
    took = time.monotonic() - started
    assert 1.5 <= took < 4.0, took
    assert raised.value.env_name == "echo-gone"
    assert raised.value.seconds >= 1.5
    assert str(raised.value).startswith("environment 'echo-gone' has been unreachable for 2 s (ENVLAB_ENV_OUTAGE_SECONDS is 1.5): reset failed ")
    assert "[Errno 111]" in raised.value.cause
    assert outage.outage_of(RuntimeError("wrapped")) is None
    try:
        raise RuntimeError("TRL's frame") from raised.value
    except RuntimeError as wrapped:
        assert outage.outage_of(wrapped) is raised.value


def test_a_4xx_answer_is_not_retried(training):
    """A server that answers, even with an error, is reachable: the reset fails at once."""
    with EnvServerProcess() as server:
        with pytest.raises(urllib.error.HTTPError) as not_found:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"{server.url}/no-such-path", timeout=5)
        assert not_found.value.code == 404
        assert outage.unreachable(not_found.value) == ""
        # The WebSocket endpoint under a path the server does not serve: the upgrade is refused (HTTP 403).
        adapter = _echo(f"{server.url}/no-such-prefix")
        started = time.monotonic()
        with pytest.raises(ConnectionError) as refused:
            adapter.reset(target="hello")
        assert time.monotonic() - started < 1.0
        assert not isinstance(refused.value, outage.EnvironmentUnreachable)
        assert str(refused.value).endswith("server rejected WebSocket connection: HTTP 403")
        assert outage.unreachable(refused.value) == ""
        assert outage.CLOCK.down_for("echo-outage") is None


def test_call_with_retry_retries_only_what_is_unreachable(training):
    calls: list[str] = []
    slept: list[float] = []

    def refused_twice() -> str:
        calls.append("try")
        if len(calls) < 3:
            raise ConnectionRefusedError(111, "Connect call failed")
        return "answered"

    result = outage.call_with_retry(
        refused_twice, env="e", what="reset", limit=60, sleep=slept.append,
        delays=outage.backoff_delays(rng=random.Random(0)),
    )
    assert (result, len(calls), len(slept)) == ("answered", 3, 2)
    assert 0.25 <= slept[0] <= 0.5 and 0.5 <= slept[1] <= 1.0

    answered: list[str] = []

    def bad_request() -> str:
        answered.append("try")
        raise ValueError("the server refused the options")

    with pytest.raises(ValueError):
        outage.call_with_retry(bad_request, env="e", what="reset", limit=60, sleep=slept.append)
    assert answered == ["try"]


def test_backoff_is_exponential_capped_and_jittered():
    delays = outage.backoff_delays(first=0.5, cap=4.0, rng=random.Random(1))
    drawn = [next(delays) for _ in range(8)]
    ceilings = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    assert all(ceiling / 2 <= d <= ceiling for d, ceiling in zip(drawn, ceilings, strict=True)), drawn
    assert len(set(drawn)) == len(drawn)  # jittered: no two alike


def test_errors_that_say_unreachable():
    assert outage.unreachable(ConnectionResetError(104, "Connection reset by peer")).startswith("ConnectionResetError")
    assert outage.unreachable(TimeoutError("the environment server did not answer within 120 s"))
    http_503 = urllib.error.HTTPError("http://x", 503, "Service Unavailable", {}, None)  # type: ignore[arg-type]
    assert outage.unreachable(http_503) == "HTTP 503"
    http_400 = urllib.error.HTTPError("http://x", 400, "Bad Request", {}, None)  # type: ignore[arg-type]
    assert outage.unreachable(http_400) == ""
    assert outage.unreachable(RuntimeError("Server error: No episode in progress (code: EXECUTION_ERROR)")) == ""


def test_a_refusal_wrapped_in_a_connection_error_is_an_answer_and_a_cut_stream_is_not():
    refused_by_rules = raised_from(ConnectionError("Failed to connect"), ValueError("the connection to x is refused: private"))
    assert outage.unreachable(refused_by_rules) == ""
    import asyncio

    from websockets.exceptions import ConnectionClosedError

    cut = raised_from(ConnectionClosedError(None, None), asyncio.IncompleteReadError(b"", 2))
    assert outage.unreachable(cut).startswith("ConnectionClosedError: no close frame received or sent")


def test_outside_training_a_reset_is_tried_once(settings):
    """The try-it console and evaluations are not training: a person waits, so no backoff."""
    settings.ENVLAB_ENV_OUTAGE_SECONDS = 60
    adapter = _echo(f"http://127.0.0.1:{free_port()}", name="echo-console")
    assert not outage.CLOCK.armed
    started = time.monotonic()
    with pytest.raises(ConnectionError) as refused:
        adapter.reset(target="hello")
    assert time.monotonic() - started < 2
    assert not isinstance(refused.value, outage.EnvironmentUnreachable)
    assert "[Errno 111]" in str(refused.value)
    assert outage.CLOCK.down_for("echo-console") is None


def test_a_stop_gives_the_wait_up_between_attempts(settings):
    """A run cancelled while its environment is away stops within one backoff delay."""
    settings.ENVLAB_ENV_OUTAGE_SECONDS = 120
    cancelled = threading.Event()
    threading.Timer(1.0, cancelled.set).start()
    adapter = _echo(f"http://127.0.0.1:{free_port()}", name="echo-cancel")
    started = time.monotonic()
    with outage.CLOCK.waiting(stop=cancelled.is_set), pytest.raises(outage.OutageWaitStopped) as stopped:
        adapter.reset(target="hello")
    assert 1.0 <= time.monotonic() - started < 1.0 + outage.MAX_DELAY_S
    assert str(stopped.value).startswith("stopped waiting for environment 'echo-cancel' (reset, unreachable for ")
    assert str(stopped.value).endswith("): the run is stopping")
    assert not outage.CLOCK.stopping()  # the check left with its wait
