"""The bundled ORS server over the wire: a real server process, the real openreward client."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from envs.ors.environments import Echo, GuessNumber, echo_score, guess_score
from envs.ors.tasks import ECHO_TASKS, GUESS_TASKS
from tests.envs.servers import free_port, run_server_command
from tests.envs.wire import get_json

SERVER_ENV = {"OPENREWARD_DISABLE_UPDATE_CHECK": "1"}
FINISHED_ERROR = (
    "episode_finished: {tool!r} was not run: the episode has finished (a tool returned "
    "finished=True), so no further tool calls are accepted."
)



@pytest.fixture(scope="module")
def ors_url() -> Iterator[str]:
    """``python -m envs.ors.server`` on a free port; ready once ``GET /health`` answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "envs.ors.server", "--host", "127.0.0.1", "--port", str(port)]
    with run_server_command(command, url, SERVER_ENV, startup_timeout=60):
        yield url


@pytest.fixture(scope="module")
def client(ors_url: str) -> Iterator[Any]:
    """The SDK client as a user sets it up for one self-hosted server."""
    from openreward import OpenReward

    with pytest.MonkeyPatch.context() as mp:
        # Without these the SDK aims at api.<host> and sessions.<host>.
        mp.setenv("OPENREWARD_API_URL", ors_url)
        mp.setenv("OPENREWARD_SESSION_URL", ors_url)
        mp.setenv("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
        with OpenReward(base_url=ors_url) as sdk:
            yield sdk


def env(client: Any, name: str) -> Any:
    # A multi-environment server picks the environment by path prefix: the SDK's `variant`.
    return client.environments.get(name, variant=name)


def texts(output: Any) -> list[str]:
    return [block.text for block in output.blocks]


# --- in-process units -------------------------------------------------------------


def test_scores() -> None:
    assert echo_score(" amber river\n", "amber river") == 1.0
    assert echo_score("amber", "amber river") == pytest.approx(
        0.5 * difflib.SequenceMatcher(None, "amber", "amber river").ratio()
    )
    assert echo_score("zzz", "amber river") == 0.0
    assert guess_score(42, 42) == 1.0
    assert guess_score(41, 42) == 0.099
    assert guess_score(1, 100) == 0.0
    assert guess_score(50, 100) == 0.0495


def test_task_lists_are_fixed_and_disjoint() -> None:
    assert [len(ECHO_TASKS[s]) for s in ("train", "test")] == [32, 8]
    assert [len(GUESS_TASKS[s]) for s in ("train", "test")] == [48, 12]
    assert ECHO_TASKS["train"][0] == {"id": "echo-train-000", "phrase": "amber river"}
    assert GUESS_TASKS["test"][0] == {"id": "guess-test-000", "target": 87}
    train = {t["phrase"] for t in ECHO_TASKS["train"]}
    test = {t["phrase"] for t in ECHO_TASKS["test"]}
    assert len(train) == 32 and len(test) == 8 and not train & test
    assert all(1 <= t["target"] <= 100 for s in GUESS_TASKS.values() for t in s)


@pytest.mark.parametrize(
    ("cls", "spec", "message"),
    [
        (Echo, {}, "^task_spec must be an object with a 'phrase' field$"),
        (Echo, {"phrase": "  "}, "^task_spec.phrase must be a non-empty string$"),
        (Echo, {"phrase": "x" * 201}, "^task_spec.phrase is longer than 200 characters$"),
        (GuessNumber, {"target": True}, "^task_spec.target must be an integer$"),
        (GuessNumber, {"target": 101}, "^task_spec.target must be from 1 to 100$"),
    ],
)
def test_task_spec_is_validated(cls: type, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cls(task_spec=spec)


# --- over the wire ----------------------------------------------------------------


def test_http_routes(ors_url: str) -> None:
    assert get_json(f"{ors_url}/health") == {"status": "ok"}
    assert get_json(f"{ors_url}/list_environments") == ["echo", "guessnumber"]
    assert get_json(f"{ors_url}/guessnumber/splits") == [
        {"name": "train", "type": "train"},
        {"name": "test", "type": "test"},
    ]


def test_client_lists_splits_tasks_and_tools(client: Any) -> None:
    echo, guess = env(client, "echo"), env(client, "guessnumber")
    assert echo.list_splits() == ["train", "test"]
    assert [echo.num_tasks("train"), echo.num_tasks("test")] == [32, 8]
    assert [guess.num_tasks("train"), guess.num_tasks("test")] == [48, 12]
    assert [t.task_spec for t in echo.list_tasks("test")] == ECHO_TASKS["test"]
    task = guess.get_task("train", 5)
    assert (task.environment_name, task.task_spec) == ("guessnumber", GUESS_TASKS["train"][5])

    [echo_tool] = echo.list_tools()
    assert echo_tool.name == "echo"
    assert echo_tool.description == (
        "Say a message; it is echoed back. Repeating the task's phrase exactly scores 1.0."
    )
    assert echo_tool.input_schema == {
        "properties": {
            "message": {
                "description": "The text to say; it is echoed back.",
                "maxLength": 2000,
                "title": "Message",
                "type": "string",
            }
        },
        "required": ["message"],
        "title": "EchoInput",
        "type": "object",
    }
    [guess_tool] = guess.list_tools()
    assert guess_tool.name == "guess"
    assert guess_tool.input_schema["properties"]["number"] == {
        "description": "Your guess, from 1 to 100.",
        "maximum": 100,
        "minimum": 1,
        "title": "Number",
        "type": "integer",
    }
    assert guess.terminal_tool() is None


def test_without_variant_the_first_environment_answers(client: Any) -> None:
    # What TRL's OpenRewardSpec does with env_name: it never reaches 'guessnumber'.
    default = client.environments.get("guessnumber")
    assert [t.name for t in default.list_tools()] == ["echo"]


def test_echo_episode(client: Any) -> None:
    phrase = ECHO_TASKS["train"][0]["phrase"]
    with env(client, "echo").session(split="train", index=0) as session:
        assert texts_of(session.get_prompt()) == [
            f"Repeat exactly, using the echo tool: {phrase}\n"
            "You have 4 tries; an exact repeat scores 1.0 and ends the episode."
        ]
        miss = session.call_tool("echo", {"message": "amber"})
        assert texts(miss) == ["amber"]
        assert miss.reward == pytest.approx(echo_score("amber", phrase))
        assert (miss.finished, miss.metadata) == (False, {"call": 1, "max_calls": 4})

        hit = session.call_tool("echo", {"message": phrase})
        assert (hit.reward, hit.finished, hit.metadata) == (1.0, True, {"call": 2, "max_calls": 4})

        with pytest.raises(Exception) as excinfo:
            session.call_tool("echo", {"message": phrase})
        assert type(excinfo.value).__name__ == "ToolCallError"
        assert excinfo.value.reason == "episode_finished"
        assert str(excinfo.value) == FINISHED_ERROR.format(tool="echo")


def test_echo_ends_after_four_calls(client: Any) -> None:
    with env(client, "echo").session(split="test", index=3) as session:
        outputs = [session.call_tool("echo", {"message": f"m{i}"}) for i in range(4)]
        assert [o.finished for o in outputs] == [False, False, False, True]
        assert [o.metadata["call"] for o in outputs] == [1, 2, 3, 4]
        assert all(0.0 <= o.reward < 0.5 for o in outputs)
        with pytest.raises(Exception, match=r"^episode_finished: "):
            session.call_tool("echo", {"message": "again"})


def test_guessnumber_per_call_rewards(client: Any) -> None:
    target = GUESS_TASKS["test"][0]["target"]  # 87
    with env(client, "guessnumber").session(split="test", index=0) as session:
        assert texts_of(session.get_prompt()) == [
            "I am thinking of a whole number from 1 to 100. Find it with the guess tool: "
            "after each wrong guess you are told whether the number is higher or lower. "
            "You have 7 guesses; the right number scores 1.0."
        ]
        outputs = [session.call_tool("guess", {"number": n}) for n in (50, 90, target)]
        assert [texts(o) for o in outputs] == [
            ["50 is wrong: the number is higher. 6 guesses left."],
            ["90 is wrong: the number is lower. 5 guesses left."],
            ["87 is right!"],
        ]
        assert [o.reward for o in outputs] == [0.0626, 0.097, 1.0]
        assert [o.finished for o in outputs] == [False, False, True]
        with pytest.raises(Exception, match=r"^episode_finished: "):
            session.call_tool("guess", {"number": target})


def test_guessnumber_runs_out_of_guesses(client: Any) -> None:
    target = GUESS_TASKS["train"][1]["target"]
    wrong = 1 if target != 1 else 2
    with env(client, "guessnumber").session(split="train", index=1) as session:
        outputs = [session.call_tool("guess", {"number": wrong}) for _ in range(7)]
        assert [o.finished for o in outputs] == [False] * 6 + [True]
        assert texts(outputs[5]) == [f"{wrong} is wrong: the number is higher. 1 guess left."]
        assert texts(outputs[6]) == [
            f"{wrong} is wrong and that was your last guess; the number was {target}."
        ]


def test_refused_calls_leave_the_episode_running(client: Any) -> None:
    with env(client, "guessnumber").session(split="train", index=0) as session:
        with pytest.raises(Exception) as excinfo:
            session.call_tool("guess", {"number": 500})
        assert excinfo.value.reason == "input_validation"
        with pytest.raises(Exception) as excinfo:
            session.call_tool("shout", {"number": 5})
        assert (excinfo.value.reason, excinfo.value.detail) == (
            "not_found",
            "'shout' is not a valid tool",
        )
        first = session.call_tool("guess", {"number": 50})
        assert first.metadata == {"call": 1, "max_calls": 7}


def test_bad_task_index_is_refused(client: Any) -> None:
    with pytest.raises(Exception) as excinfo:
        with env(client, "echo").session(split="test", index=8):
            pass
    assert (excinfo.value.status, excinfo.value.message) == (400, "Invalid index")


def texts_of(blocks: list[Any]) -> list[str]:
    return [block.text for block in blocks]
