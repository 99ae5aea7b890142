"""ORS environments through the training adapter: a real ORS server process, no mocks."""

from __future__ import annotations

import inspect
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from transformers.utils import get_json_schema

from envs.adapters.base import EpisodeLost
from envs.adapters.ors import OrsAdapter, _tool_method, ors_adapter_class, ors_rows
from envs.ors.tasks import ECHO_TASKS, GUESS_TASKS
from tests.envs.servers import free_port, run_server_command
from tests.support.tool_schemas import tool_schema

SERVER_ENV = {"OPENREWARD_DISABLE_UPDATE_CHECK": "1"}
GUESS_PROMPT = (
    "I am thinking of a whole number from 1 to 100. Find it with the guess tool: after each "
    "wrong guess you are told whether the number is higher or lower. You have 7 guesses; the "
    "right number scores 1.0."
)
# What every ORS tool's result is described as.
ORS_RESULT = "The tool's result as text."
GUESS_SCHEMA = tool_schema(
    "guess",
    "Guess the hidden number; the answer says whether it is higher or lower.",
    {"number": {"type": "integer", "description": "Your guess, from 1 to 100."}},
    required=["number"],
    returns=ORS_RESULT,
)


@contextmanager
def ors_server(port: int) -> Iterator[str]:
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "envs.ors.server", "--host", "127.0.0.1", "--port", str(port)]
    with run_server_command(command, url, SERVER_ENV, startup_timeout=60):
        yield url


@pytest.fixture(scope="module")
def ors_url() -> Iterator[str]:
    with ors_server(free_port()) as url:
        yield url


@pytest.fixture(scope="module")
def guess_cls(ors_url: str) -> type[OrsAdapter]:
    return ors_adapter_class(base_url=ors_url, env_name="guessnumber", split="test")


@pytest.fixture(scope="module")
def echo_cls(ors_url: str) -> type[OrsAdapter]:
    return ors_adapter_class(base_url=ors_url, env_name="echo")


def trl_tools(adapter: Any) -> list[Any]:
    """The methods TRL's GRPOTrainer turns into tools (trl 1.16's own discovery rule)."""
    return [
        getattr(adapter, name)
        for name, _ in inspect.getmembers(type(adapter), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def binary_search(adapter: Any) -> list[str]:
    low, high, answers = 1, 100, []
    while not adapter.done:
        middle = (low + high) // 2
        answers.append(adapter.guess(middle))
        if "higher" in answers[-1]:
            low = middle + 1
        elif "lower" in answers[-1]:
            high = middle - 1
    return answers


def session_alive(url: str, sid: str) -> bool:
    request = urllib.request.Request(f"{url}/ping", method="POST", headers={"X-Session-ID": sid})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=5) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
        return False


# --- rows -------------------------------------------------------------------------


def test_rows_for_a_split(ors_url: str) -> None:
    rows = ors_rows(base_url=ors_url, env_name="guessnumber", split="test")
    assert len(rows) == 12
    assert rows[0] == {
        "prompt": [{"role": "user", "content": GUESS_PROMPT}],
        "task_index": 0,
        "split": "test",
        "env": "guessnumber",
    }
    assert [r["task_index"] for r in rows] == list(range(12))

    echo = ors_rows(base_url=ors_url + "/", env_name="echo", indices=[5, 1])
    assert [r["task_index"] for r in echo] == [5, 1]
    assert echo[0]["prompt"][0]["content"].startswith(
        f"Repeat exactly, using the echo tool: {ECHO_TASKS['train'][5]['phrase']}\n"
    )
    capped = ors_rows(base_url=ors_url, env_name="echo", split="test", num_tasks=50)
    assert [r["task_index"] for r in capped] == list(range(8))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_tasks": 2, "indices": [0]}, ValueError, r"^give num_tasks or indices, not both$"),
        ({"num_tasks": 0}, ValueError, r"^num_tasks must be a positive integer, got 0$"),
        ({"indices": [3, 12, -1]}, ValueError, r"^task indices \[12, -1\] are outside split 'test' \(0..11\)$"),
        ({"split": "dev"}, ValueError, r"^'guessnumber' has no split 'dev'$"),
        ({"env_name": "chess"}, ValueError, r"^ORS server http://127.0.0.1:\d+ has no environment 'chess'; it serves \['echo', 'guessnumber'\]$"),
        ({"base_url": "http://127.0.0.1:1/x"}, ValueError, r"^base_url must be a server origin without a path"),
        ({"api_key_env": "ENVLAB_NO_SUCH_KEY"}, ValueError, r"^no Open Reward API key for this run: store yours on your account page, or ask the operator to set ENVLAB_NO_SUCH_KEY for the workers$"),
    ],
)  # fmt: skip
def test_rows_reject_bad_requests(
    ors_url: str, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments = {"base_url": ors_url, "env_name": "guessnumber", "split": "test", **kwargs}
    with pytest.raises(error, match=message):
        ors_rows(**arguments)


def test_unreachable_server_is_a_runtime_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RuntimeError, match=r"^ORS environment 'echo' at http://127.0.0.1:\d+: "):
        ors_adapter_class(base_url=url, env_name="echo")


# --- the class TRL gets -------------------------------------------------------------


def test_one_typed_tool_per_ors_tool(
    guess_cls: type[OrsAdapter], echo_cls: type[OrsAdapter]
) -> None:
    assert (guess_cls.__name__, guess_cls.env_name, guess_cls.split) == (
        "OrsGuessnumberAdapter",
        "guessnumber",
        "test",
    )
    assert (guess_cls.tool_names, guess_cls.splits) == (("guess",), ("train", "test"))
    adapter = guess_cls()
    assert [t.__name__ for t in trl_tools(adapter)] == ["guess"]
    assert get_json_schema(adapter.guess) == GUESS_SCHEMA
    assert str(inspect.signature(adapter.guess)) == "(number: int) -> str"
    [echo] = trl_tools(echo_cls())
    assert get_json_schema(echo)["function"] == tool_schema(
        "echo",
        "Say a message; it is echoed back. Repeating the task's phrase exactly scores 1.0.",
        {"message": {"type": "string", "description": "The text to say; it is echoed back."}},
        required=["message"],
        returns=ORS_RESULT,
    )["function"]
    assert (
        adapter.reward,
        adapter.lost,
        adapter.done,
        adapter.tool_calls,
        adapter.tool_failures,
    ) == (
        0.0,
        False,
        False,
        0,
        0,
    )


def test_tool_schemas_from_json_schema() -> None:
    from openreward import ToolSpec

    spec = ToolSpec(
        name="move",
        description="Move a piece.\n\nArgs:\n    ignored: server-side docs are replaced",
        input_schema={
            "type": "object",
            "properties": {
                "note": {
                    "anyOf": [{"type": "string"}, {"type": "null"}],
                    "default": None,
                    "title": "Note",
                },
                "square": {"type": "string", "description": "Target  square,\n e.g. e4."},
                "speed": {"type": "number", "description": "How fast.", "default": 1.5},
                "piece": {"enum": ["king", "queen"], "description": "Which piece."},
                "capture": {"type": "boolean", "description": "Take a piece there."},
                "path": {"type": "array", "items": {"type": "integer"}, "description": "Squares."},
                "count": {"type": "integer", "description": "How many."},
            },
            "required": ["square", "piece", "capture", "path", "count"],
        },
    )
    method = _tool_method(spec)
    assert str(inspect.signature(method)) == (
        "(self, square: str, piece: Literal['king', 'queen'], capture: bool, path: list[int], count: int, "
        "note: Optional[str] = None, speed: float = 1.5) -> str"
    )
    assert get_json_schema(method)["function"] == tool_schema(
        "move",
        "Move a piece.",
        {
            "square": {"type": "string", "description": "Target square, e.g. e4."},
            "piece": {"type": "string", "enum": ["king", "queen"], "description": "Which piece."},
            "capture": {"type": "boolean", "description": "Take a piece there."},
            "path": {"type": "array", "items": {"type": "integer"}, "description": "Squares."},
            "count": {"type": "integer", "description": "How many."},
            "note": {"type": "string", "nullable": True, "description": "Note"},
            "speed": {"type": "number", "description": "How fast."},
        },
        required=["square", "piece", "capture", "path", "count"],
        returns=ORS_RESULT,
    )["function"]


@pytest.mark.parametrize(
    ("name", "schema", "message"),
    [
        ("reset", None, r"^ORS tool name 'reset' cannot be a Python method"),
        ("lost", None, r"^ORS tool name 'lost' cannot be a Python method"),
        ("go-left", None, r"^ORS tool name 'go-left' cannot be a Python method"),
        ("move", {"properties": ["to"]}, r"^ORS tool 'move' has a malformed input schema$"),
        ("move", {"properties": {"to": "a square"}}, r"^property 'to' has a malformed schema$"),
        ("move", {"properties": {"class": {"type": "string"}}}, r"^ORS tool 'move': argument name 'class' cannot be a Python parameter$"),
    ],
)  # fmt: skip
def test_unusable_tools_are_rejected(
    name: str, schema: dict[str, Any] | None, message: str
) -> None:
    from openreward import ToolSpec

    with pytest.raises(ValueError, match=message):
        _tool_method(ToolSpec(name=name, description="x", input_schema=schema))


def test_class_rejects_unknown_split(ors_url: str) -> None:
    with pytest.raises(
        ValueError, match=r"^'echo' has no split 'dev'; it has \['train', 'test'\]$"
    ):
        ors_adapter_class(base_url=ors_url, env_name="echo", split="dev")
    with pytest.raises(TypeError, match=r"^OrsAdapter is abstract"):
        OrsAdapter()


# --- episodes -----------------------------------------------------------------------


def test_guess_episode(ors_url: str, guess_cls: type[OrsAdapter]) -> None:
    rows = ors_rows(base_url=ors_url, env_name="guessnumber", split="test", indices=[0])
    adapter = guess_cls()
    assert adapter.reset(**rows[0]) is None  # the row already carries the prompt
    answers = binary_search(adapter)
    assert answers == [
        "50 is wrong: the number is higher. 6 guesses left.",
        "75 is wrong: the number is higher. 5 guesses left.",
        "88 is wrong: the number is lower. 4 guesses left.",
        "81 is wrong: the number is higher. 3 guesses left.",
        "84 is wrong: the number is higher. 2 guesses left.",
        "86 is wrong: the number is higher. 1 guess left.",
        "87 is right!",
    ]
    assert adapter.rewards == [0.0626, 0.0879, 0.099, 0.0939, 0.097, 0.099, 1.0]
    assert (adapter.reward, adapter.done, adapter.lost) == (1.0, True, False)
    assert (adapter.tool_calls, adapter.tool_failures) == (7, 0)

    with pytest.raises(RuntimeError, match=r"^Game over\.$"):
        adapter.guess(87)
    assert (adapter.tool_calls, adapter.tool_failures, adapter.reward) == (7, 0, 1.0)

    # A new row: a fresh session on another task, counters back to zero.
    assert adapter.reset(task_index=1, split="test", prompt=[{"role": "user", "content": ""}]) == (
        "\n" + GUESS_PROMPT
    )
    assert (adapter.rewards, adapter.reward, adapter.done, adapter.tool_calls) == (
        [],
        0.0,
        False,
        0,
    )
    assert (
        adapter.guess(GUESS_TASKS["test"][1]["target"])
        == f"{GUESS_TASKS['test'][1]['target']} is right!"
    )
    assert (adapter.reward, adapter.done) == (1.0, True)


def test_echo_episode_with_refused_calls(echo_cls: type[OrsAdapter]) -> None:
    phrase = ECHO_TASKS["train"][2]["phrase"]
    adapter = echo_cls()
    adapter.reset(task_index=2)
    with pytest.raises(ValueError, match=r"^Tool input validation error: .*string_too_long"):
        adapter.echo("x" * 2001)
    with pytest.raises(TypeError, match=r"^echo: missing a required argument: 'message'$"):
        adapter.echo()
    assert adapter.echo("nope") == "nope"
    assert 0.0 <= adapter.reward < 0.5 and adapter.done is False
    assert adapter.echo(phrase) == phrase
    assert (adapter.reward, adapter.done, adapter.tool_calls, adapter.tool_failures) == (
        1.0,
        True,
        4,
        2,
    )
    assert len(adapter.rewards) == 2  # refused calls never reached the episode


def test_rows_pick_their_split(echo_cls: type[OrsAdapter]) -> None:
    adapter = echo_cls()  # built for "train"
    phrase = ECHO_TASKS["test"][7]["phrase"]
    assert adapter.reset(task_index=7, split="test").startswith(
        f"\nRepeat exactly, using the echo tool: {phrase}\n"
    )
    assert adapter.echo(phrase) == phrase
    assert (adapter.reward, adapter.done) == (1.0, True)


def test_relabelled_subclass_keeps_its_server(guess_cls: type[OrsAdapter]) -> None:
    # How the worker binds an adapter to a run: a subclass with the run's name for it.
    bound = type(guess_cls.__name__, (guess_cls,), {"env_name": "numbers", "base_url": "x"})
    adapter = bound()
    adapter.reset(task_index=2, split="test")
    target = GUESS_TASKS["test"][2]["target"]
    assert adapter.guess(target) == f"{target} is right!"
    assert (adapter.env_name, adapter.reward, [t.__name__ for t in trl_tools(adapter)]) == (
        "numbers",
        1.0,
        ["guess"],
    )


def test_reset_closes_the_previous_session(ors_url: str, echo_cls: type[OrsAdapter]) -> None:
    adapter = echo_cls()
    adapter.reset(task_index=0)
    first_sid = adapter._session.sid  # private: the server's handle on this episode
    assert session_alive(ors_url, first_sid)
    adapter.reset(task_index=1)
    deadline = time.monotonic() + 10
    while session_alive(ors_url, first_sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not session_alive(ors_url, first_sid)
    assert session_alive(ors_url, adapter._session.sid)


def test_bad_rows_are_rejected(echo_cls: type[OrsAdapter]) -> None:
    adapter = echo_cls()
    with pytest.raises(
        ValueError, match=r"^an ORS row needs a non-negative integer 'task_index', got None$"
    ):
        adapter.reset(prompt=[{"role": "user", "content": "hi"}])
    with pytest.raises(
        ValueError, match=r"^row asks for split 'dev'; 'echo' has \['train', 'test'\]$"
    ):
        adapter.reset(task_index=0, split="dev")
    with pytest.raises(
        RuntimeError, match=r"^cannot open a session on task 99: .*HTTP 400: Invalid index$"
    ):
        adapter.reset(task_index=99)
    with pytest.raises(RuntimeError, match=r"^No episode in progress: reset\(\) opens one\.$"):
        adapter.echo("hello")


def test_server_restart_loses_the_episode() -> None:
    port = free_port()
    with ors_server(port) as url:
        cls = ors_adapter_class(base_url=url, env_name="guessnumber", split="test")
        adapter = cls()
        adapter.reset(task_index=0)
        assert adapter.guess(50) == "50 is wrong: the number is higher. 6 guesses left."
    with ors_server(port):
        with pytest.raises(
            EpisodeLost,
            match=r"HTTP 404: Active environment not found\); this rollout is unscored\.$",
        ):
            adapter.guess(75)
        assert (adapter.lost, adapter.done, adapter.tool_calls, adapter.tool_failures) == (
            True,
            False,
            2,
            1,
        )
        assert adapter.rewards == [0.0626]
        # Nothing continues silently: the lost episode stays lost until the next reset.
        with pytest.raises(
            EpisodeLost, match=r"^The ORS session was lost; this rollout is unscored\.$"
        ):
            adapter.guess(87)
        assert adapter.tool_calls == 2
        adapter.reset(task_index=0)
        assert (adapter.lost, adapter.tool_calls) == (False, 0)
        assert adapter.guess(87) == "87 is right!"
