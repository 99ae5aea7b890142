"""Play episodes with a policy (envs/solvers.py) through a training adapter, and record them
as the chat TRL's tool loop would have built.

The adapter is the same class GRPOTrainer gets from `environment_factory`, called the way
TRL 1.16 calls it (`GRPOTrainer._tool_call_loop`): `reset(**row)` and its text appended to
the last prompt message, the tools are the adapter's public methods, a tool's exception
becomes the result `str({"error": str(exc)})`. So the transcript of a solver's episode is a
conversation the model could have had: an SFT warm-up trains on it, an evaluation stores it.

Transcript messages, in TRL's format:
- the row's prompt messages, the last one with the reset text appended;
- per call, ``{"role": "assistant", "content": "", "tool_calls": [{"type": "function",
  "function": {"name": ..., "arguments": {...}}}]}`` then ``{"role": "tool", "name": ...,
  "content": ...}``;
- when the policy stops or the environment ends the episode, a closing
  ``{"role": "assistant", "content": policy.final_text}`` (the turn without a tool call
  that ends a rollout). At the call limit there is none, as TRL stops mid-conversation.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from envs.adapters.base import EnvironmentAtCapacity
from envs.solvers import Policy, ToolCall, policy_for

log = logging.getLogger(__name__)

EndedBy = Literal["policy", "environment", "limit"]


@dataclass
class Episode:
    """One played episode: its transcript and how it went (JSON-ready with `as_dict`)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    reward: float
    won: bool
    tool_calls: int
    tool_failures: int
    lost: bool
    ended_by: EndedBy
    row: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def tool_call_message(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """An assistant turn that makes one tool call, as an episode records it (the chat
    template renders it as the model's call)."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": dict(arguments)}}],
    }


def adapter_tools(adapter: Any) -> dict[str, Callable[..., Any]]:
    """The adapter's tools as TRL 1.16 lists them: public functions of its class other than
    `reset` and `get_reward`, bound to the instance, by name."""
    return {
        name: getattr(adapter, name)
        for name, _ in inspect.getmembers(type(adapter), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }


def tool_schemas(adapter: Any) -> list[dict[str, Any]]:
    """The JSON schemas the chat template renders for the adapter's tools (what the model
    reads, and what a random policy draws its arguments from)."""
    from transformers.utils import get_json_schema  # what TRL's chat template path uses

    return [get_json_schema(method) for method in adapter_tools(adapter).values()]


def stated_iterations(*, settings: Mapping[str, Any]) -> int:
    """The `max_tool_calling_iterations` that `settings` (an evaluation's settings, a job's
    params) state, else the default an evaluation gives a model: the one cap of every
    episode played there, a model's rounds and a reference policy's calls alike."""
    from webapp.evaluations.config import DEFAULT_MAX_TOOL_CALLING_ITERATIONS

    return int(settings.get("max_tool_calling_iterations") or DEFAULT_MAX_TOOL_CALLING_ITERATIONS)


def adapter_policy(adapter: Any, *, key: str, kind: str = "solver", seed: int = 0) -> Policy:
    """The policy for the environment behind `adapter`: the solver of bundled environment
    `key` (echo, wordle, catch, sudoku) or, for any other key or `kind="random"`, the random
    valid policy over the adapter's tools, seeded with `seed`."""
    return policy_for(key, tools=tool_schemas(adapter), seed=seed, kind=kind)


def _prompt_messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if (
        not isinstance(prompt, list)
        or not prompt
        or not all(isinstance(m, Mapping) and isinstance(m.get("content"), str) for m in prompt)
    ):
        raise ValueError(
            "an episode row needs a 'prompt': a string or a list of chat messages with text "
            f"'content' (got {type(prompt).__name__})"
        )
    return [dict(message) for message in prompt]


def _won(adapter: Any) -> bool:
    """Whether the episode was won: the adapter's own verdict where it keeps one (wordle and
    catch `won`, sudoku `solved`), else a full reward (echo's exact repeat, mcpdemo's total)."""
    for name in ("won", "solved"):
        verdict = getattr(adapter, name, None)
        if isinstance(verdict, bool):
            return verdict
    return float(adapter.reward) >= 1.0


def _call_tool(tools: Mapping[str, Callable[..., Any]], call: ToolCall) -> tuple[str, bool]:
    """The tool message content for one call and whether it failed, as TRL builds them."""
    try:
        if call.name not in tools:
            raise ValueError(f"Tool {call.name} not found.")
        result = tools[call.name](**call.arguments)
    except EnvironmentAtCapacity:
        raise  # not the call's fault: the run cannot go on (as in training)
    except Exception as exc:
        return str({"error": str(exc)}), True
    content = result if isinstance(result, list) else str(result)
    return content, False  # type: ignore[return-value]  # a list only for multimodal tools


def play_episode(
    *,
    adapter: Any,
    policy: Policy,
    row: Mapping[str, Any],
    max_calls: int | None,
) -> Episode:
    """Reset `adapter` with `row`, let `policy` call its tools until it stops, the episode
    ends (`adapter.done`), the episode is lost or `max_calls` calls were made (`ended_by`
    "limit").

    `max_calls` has no default: it is the rule the episode is played under. A reference
    policy makes one call a turn, so its cap is the `max_tool_calling_iterations` the model
    gets in the same place (`stated_iterations`): an episode longer than the model may play
    shows, or teaches, nothing the model can do. None: the policy counts TRL's rounds itself
    (ModelPolicy; a round may hold several calls).

    Raises:
        ValueError: the row has no usable prompt, or `max_calls` is below 1.
        Whatever `reset` raises (an unreachable server, a refused row, EnvironmentAtCapacity).
    """
    if max_calls is not None and max_calls < 1:
        raise ValueError(f"max_calls must be at least 1, got {max_calls}")
    messages = _prompt_messages(row)
    observation = adapter.reset(**row)
    if isinstance(observation, str):
        last = messages[-1]
        messages[-1] = {**last, "content": last["content"] + observation}
    policy.start(messages[-1]["content"], row)
    tools = adapter_tools(adapter)
    schemas = tool_schemas(adapter)
    failures = 0
    last_result: str | None = None
    ended_by: EndedBy = "limit"
    for _ in itertools.repeat(None) if max_calls is None else range(max_calls):
        call = policy.next_call(last_result)
        if call is None:
            ended_by = "policy"
            break
        arguments = copy.deepcopy(dict(call.arguments))
        messages.append(tool_call_message(call.name, arguments))
        last_result, failed = _call_tool(tools, ToolCall(call.name, copy.deepcopy(arguments)))
        failures += failed
        messages.append({"role": "tool", "name": call.name, "content": last_result})
        if getattr(adapter, "done", False) or getattr(adapter, "lost", False):
            ended_by = "environment"
            break
    if ended_by != "limit":
        messages.append({"role": "assistant", "content": str(policy.final_text)})
    calls = sum(1 for message in messages if message.get("tool_calls"))
    return Episode(
        messages=messages,
        tools=schemas,
        reward=float(adapter.reward),
        won=_won(adapter),
        tool_calls=calls,
        tool_failures=failures,
        lost=bool(getattr(adapter, "lost", False)),
        ended_by=ended_by,
        row={key: value for key, value in row.items() if key != "prompt"},
    )


def play_episodes(
    *,
    adapter: Any,
    policy: Policy,
    rows: Iterable[Mapping[str, Any]],
    max_calls: int | None,
) -> list[Episode]:
    """`play_episode` for each row in turn on one adapter instance (reset between episodes,
    as TRL reuses its pooled instances); the adapter's client is closed at the end."""
    try:
        return [
            play_episode(adapter=adapter, policy=policy, row=row, max_calls=max_calls)
            for row in rows
        ]
    finally:
        disconnect(adapter)


def disconnect(adapter: Any) -> None:
    """Close the adapter's connection to its environment server, once the worker is done
    playing on it. An adapter's public methods are the model's tools, so its close is the
    private `_close` (envs/adapters/base.py); an adapter without one has nothing to close."""
    close = getattr(adapter, "_close", None)
    if callable(close):
        close()


def summarize(episodes: Sequence[Episode]) -> dict[str, float | int]:
    """Episodes, wins, mean reward and tool failures of a set of episodes."""
    count = len(episodes)
    return {
        "episodes": count,
        "wins": sum(episode.won for episode in episodes),
        "mean_reward": sum(episode.reward for episode in episodes) / count if count else 0.0,
        "tool_failures": sum(episode.tool_failures for episode in episodes),
    }
