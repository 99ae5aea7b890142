"""The echo environment over the wire: a real uvicorn server, the real client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from envs.common import max_concurrent_envs
from envs.echo.client import EchoEnv, open_echo_env
from envs.echo.models import EchoAction, EchoState
from envs.echo.server import EchoEnvironment, score
from tests.envs.servers import free_port, run_env_server
from tests.envs.wire import (
    NOT_STARTED_ERROR,
    SERVER_ENV,
    assert_bundled_routes,
    assert_openenv_validate_passes,
    assert_session_refused,
    get_json,
    over_error,
    refused_then_stepped,
    server_error,
    two_session_server,
)

pytestmark: list[pytest.MarkDecorator] = []

APP = "envs.echo.server:app"
HELLO_INSTRUCTION = (
    "Repeat exactly: hello\nYou have 4 tries; an exact repeat scores 1.0 and ends the episode."
)






@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    with run_env_server(APP, {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "8"}) as url:
        yield url


# --- in-process units -------------------------------------------------------------


def test_max_concurrent_envs_reads_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAX_CONCURRENT_ENVS", raising=False)
    assert max_concurrent_envs() == 64
    assert max_concurrent_envs(default=3) == 3
    monkeypatch.setenv("MAX_CONCURRENT_ENVS", " 5 ")
    assert max_concurrent_envs() == 5
    monkeypatch.setenv("MAX_CONCURRENT_ENVS", "")
    assert max_concurrent_envs() == 64


@pytest.mark.parametrize("raw", ["0", "-2", "abc", "1.5"])
def test_max_concurrent_envs_rejects_bad_values(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("MAX_CONCURRENT_ENVS", raw)
    with pytest.raises(ValueError, match=r"^MAX_CONCURRENT_ENVS must be a positive integer, got "):
        max_concurrent_envs()


def test_max_concurrent_envs_rejects_bad_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAX_CONCURRENT_ENVS", raising=False)
    with pytest.raises(ValueError, match=r"^default must be a positive integer, got 0$"):
        max_concurrent_envs(default=0)


def test_score() -> None:
    assert score("anything", None) == 0.0
    assert score("  hello\n", "hello") == 1.0
    assert score("help", "hello") == pytest.approx(1 / 3)  # ratio 6/9, halved
    assert score("xyz", "hello") == 0.0
    assert score("Hello", "hello") < 0.5


def test_reset_rejects_bad_target() -> None:
    env = EchoEnvironment()
    with pytest.raises(ValueError, match=r"^target must not be empty$"):
        env.reset(target="   ")
    assert env.reset(target="  hi ").metadata["step_count"] == 0
    assert env.state.target == "hi"


# --- over the wire ----------------------------------------------------------------


def test_http_routes(echo_url: str) -> None:
    description, schema = assert_bundled_routes(
        echo_url, "echo", action="EchoAction", required=["message"],
        observation=["echoed_message", "instruction"], state=["target", "max_steps", "done"],
    )
    assert description.startswith("Echoes each message back")
    assert schema["action"]["properties"]["message"]["maxLength"] == 2000
    # HTTP /state is stateless: a fresh, never-reset environment.
    assert get_json(f"{echo_url}/state") == {
        "episode_id": None, "step_count": 0, "target": None, "max_steps": 4, "done": False
    }


def test_exact_match_scores_one_and_ends_episode(echo_url: str) -> None:
    with open_echo_env(echo_url) as env:
        first = env.reset(target="hello")
        episode_id = first.observation.metadata["episode_id"]
        assert first.reward is None
        assert first.done is False
        assert first.observation.echoed_message == ""
        assert first.observation.instruction == HELLO_INSTRUCTION
        assert first.metadata == {"episode_id": episode_id, "step_count": 0, "max_steps": 4}

        result = env.step(EchoAction(message=" hello\n"))
        assert result.reward == 1.0
        assert result.done is True
        assert result.observation.echoed_message == " hello\n"
        assert result.observation.reward == 1.0
        assert result.observation.done is True
        assert result.observation.metadata == {
            "episode_id": episode_id,
            "step_count": 1,
            "max_steps": 4,
        }
        assert env.state() == EchoState(
            episode_id=episode_id, step_count=1, target="hello", max_steps=4, done=True
        )

        assert server_error(lambda: env.step(EchoAction(message="hello"))) == over_error(episode_id)

        # The socket survives the error; reset starts over.
        again = env.reset(target="hello")
        assert again.observation.metadata["episode_id"] != episode_id
        assert env.step(EchoAction(message="hello")).reward == 1.0


def test_partial_credit_and_step_limit(echo_url: str) -> None:
    with open_echo_env(echo_url) as env:
        env.reset(target="hello")
        rewards = []
        for step in range(1, 5):
            result = env.step(EchoAction(message="help"))
            rewards.append(result.reward)
            assert result.observation.metadata["step_count"] == step
            assert result.done is (step == 4)
        assert rewards == [pytest.approx(1 / 3)] * 4
        assert all(0.0 <= r < 1.0 for r in rewards)
        with pytest.raises(RuntimeError, match=r"\(code: EXECUTION_ERROR\)$"):
            env.step(EchoAction(message="hello"))


def test_without_target_reward_is_zero(echo_url: str) -> None:
    with open_echo_env(echo_url) as env:
        reset = env.reset()
        assert reset.observation.instruction == (
            "Say anything; it is echoed back. The episode ends after 4 steps."
        )
        results = [env.step(EchoAction(message=f"m{i}")) for i in range(4)]
        assert [r.reward for r in results] == [0.0, 0.0, 0.0, 0.0]
        assert [r.done for r in results] == [False, False, False, True]
        assert [r.observation.echoed_message for r in results] == ["m0", "m1", "m2", "m3"]


def test_episode_ids(echo_url: str) -> None:
    with open_echo_env(echo_url) as env:
        ids = {env.reset().observation.metadata["episode_id"] for _ in range(3)}
        assert len(ids) == 3
        chosen = env.reset(episode_id="ep-42", target="hi")
        assert chosen.observation.metadata["episode_id"] == "ep-42"
        assert env.state().episode_id == "ep-42"


def test_step_before_reset_is_an_error(echo_url: str) -> None:
    with open_echo_env(echo_url) as env:
        assert server_error(lambda: env.step(EchoAction(message="hello"))) == NOT_STARTED_ERROR
        assert env.state().episode_id is None


def test_concurrent_sessions_are_independent(echo_url: str) -> None:
    with open_echo_env(echo_url) as a, EchoEnv(base_url=echo_url).sync() as b:
        id_a = a.reset(target="alpha").observation.metadata["episode_id"]
        id_b = b.reset(target="beta").observation.metadata["episode_id"]
        assert id_a != id_b
        hit = b.step(EchoAction(message="beta"))
        assert (hit.reward, hit.done) == (1.0, True)
        miss = a.step(EchoAction(message="beta"))
        assert miss.reward is not None and miss.reward < 0.5
        assert miss.done is False
        assert miss.observation.metadata == {"episode_id": id_a, "step_count": 1, "max_steps": 4}
        assert a.state() == EchoState(episode_id=id_a, step_count=1, target="alpha", done=False)
        assert b.state() == EchoState(episode_id=id_b, step_count=1, target="beta", done=True)


def test_wire_protocol_validation_error(echo_url: str) -> None:
    reply, error, stepped = refused_then_stepped(
        echo_url, {"target": "hi"}, {"message": "y" * 2001}, {"message": "hi"}
    )
    assert reply["type"] == "observation"
    assert set(reply["data"]) == {"observation", "reward", "done", "metadata"}
    assert error["type"] == "error"
    assert error["data"]["message"] == "Invalid message"
    assert error["data"]["code"] == "VALIDATION_ERROR"
    assert error["data"]["errors"][0]["type"] == "string_too_long"
    assert stepped["data"]["reward"] == 1.0


def test_capacity_reached() -> None:
    with two_session_server("envs.echo.server") as url:
        with open_echo_env(url) as a, open_echo_env(url) as b:
            a.reset()
            b.reset()
            assert_session_refused(open_echo_env(url))
            assert a.step(EchoAction(message="still here")).reward == 0.0
        # Both sessions closed: slots are free again.
        with open_echo_env(url) as a, open_echo_env(url) as b:
            assert a.reset().done is False
            assert b.reset().done is False


def test_server_restart_is_detectable() -> None:
    port = free_port()
    env = open_echo_env(f"http://127.0.0.1:{port}")
    try:
        with run_env_server(APP, SERVER_ENV, port=port):
            env.connect()
            old_id = env.reset(target="hello").observation.metadata["episode_id"]
        with run_env_server(APP, SERVER_ENV, port=port):
            # The client reconnects silently to a brand-new environment.
            assert server_error(lambda: env.step(EchoAction(message="hello"))) == NOT_STARTED_ERROR
            new_id = env.reset(target="hello").observation.metadata["episode_id"]
            assert new_id != old_id
    finally:
        env.close()


def test_openenv_validate(echo_url: str, tmp_path: Path) -> None:
    assert_openenv_validate_passes(echo_url, tmp_path)
