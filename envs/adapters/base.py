"""Shared parts of OpenEnv adapters: a fresh client per episode, lost-episode detection.

TRL turns every public method of an adapter, other than `reset`, into a tool: helpers
here stay private (a leading underscore).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import time
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from envs.adapters import activity, outage, toolstats
from envs.adapters.loop import LoopClient
from envs.adapters.tool_metrics import TRANSPORT_ERROR, safe_tool_name

log = logging.getLogger(__name__)

DEFAULT_MAX_TOOL_TEXT = 64 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024


def _limit(name: str, default: int) -> int:
    # Adapters run in the worker and the web process (Django configured) and in scripts
    # and benchmarks (maybe not): there the default applies.
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        return int(getattr(settings, name, default))
    except ImproperlyConfigured:
        return default


def clip_tool_text(text: str, limit: int | None = None) -> str:
    """`text` cut to ENVLAB_MAX_TOOL_TEXT characters, saying how much was cut.

    Everything an environment server says reaches the model's context and the stored
    transcript through here: one server must not fill either.
    """
    limit = _limit("ENVLAB_MAX_TOOL_TEXT", DEFAULT_MAX_TOOL_TEXT) if limit is None else limit
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [truncated {len(text) - limit} characters]"


def _clipped_error(exc: Exception) -> Exception:
    text = clip_tool_text(str(exc))
    try:
        return type(exc)(text)  # same type: EpisodeLost and the like keep their meaning
    except Exception:
        return RuntimeError(text)


def _count_episode_call(owner: Any, name: str | None, *, failed: bool) -> None:
    """Per-episode calls and failures by tool, on the adapter (`_tool_counts`, read by reward
    terms through envs/adapters/attributes.py); `reset` (name None) starts them afresh."""
    state = getattr(owner, "__dict__", None)
    if state is None:
        return
    if name is None:
        state["_tool_counts"] = {}
        return
    entry = state.setdefault("_tool_counts", {}).setdefault(name, [0, 0])
    entry[0] += 1
    entry[1] += int(failed)


def _note_episode_seed(owner: Any, seed: Any) -> None:
    """The seed of the row `reset` was given (`_episode_seed`): stored with the rollout, so the
    arena can replay the same episode."""
    state = getattr(owner, "__dict__", None)
    if state is not None:
        state["_episode_seed"] = seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def reset_fingerprint(observation: Any) -> str:
    """A short hash of what `reset` returned: the text TRL appends to the prompt (None is a
    value of its own). GRPO compares the completions of a group as if they started alike: the
    worker checks that a group's fingerprints agree (webapp/runs/telemetry/group_starts.py)."""
    text = json.dumps(observation, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _note_reset_fingerprint(owner: Any, observation: Any = None, *, known: bool = True) -> None:
    """`_reset_fingerprint` on the adapter: None until its reset returns (a failed reset leaves
    no fingerprint of the previous episode behind)."""
    state = getattr(owner, "__dict__", None)
    if state is None:
        return
    try:
        state["_reset_fingerprint"] = reset_fingerprint(observation) if known else None
    except Exception:  # a check of the run's groups must never fail an episode
        log.exception("fingerprinting a reset observation failed")
        state["_reset_fingerprint"] = None


def _env_name(owner: Any) -> str:
    """The environment a tool call goes to, by its catalog name where the worker bound one."""
    return str(getattr(owner, "catalog_name", "") or getattr(owner, "env_name", "") or "")


def _clipping(func: Callable[..., Any]) -> Callable[..., Any]:
    # Every tool call passes here: counted per tool (envs/adapters/toolstats.py), reset is not a tool.
    counted = safe_tool_name(func.__name__) if func.__name__ != "reset" else None

    @functools.wraps(func)  # TRL describes the tool from the name, docstring and signature
    def clipped(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        owner = args[0] if args else None
        if counted is None:
            _count_episode_call(owner, None, failed=False)
            _note_episode_seed(owner, kwargs.get("seed"))
            _note_reset_fingerprint(owner, known=False)
        # What a stalled run is stuck in (envs/adapters/activity.py): this call, until it returns.
        doing = activity.ACTIVITY.enter(
            activity.TOOL_CALL if counted is not None else activity.RESET, _env_name(owner), counted or ""
        )
        try:
            result = func(*args, **kwargs)
        except Exception as exc:
            if counted is not None:
                toolstats.record_failure(counted, time.perf_counter() - started, exc)
                _count_episode_call(owner, counted, failed=True)
            if len(str(exc)) <= _limit("ENVLAB_MAX_TOOL_TEXT", DEFAULT_MAX_TOOL_TEXT):
                raise
            raise _clipped_error(exc) from None  # TRL hands str(exc) to the model
        finally:
            activity.ACTIVITY.leave(doing)
        if counted is not None:
            toolstats.record(counted, time.perf_counter() - started, None)
            _count_episode_call(owner, counted, failed=False)
        result = clip_tool_text(result) if isinstance(result, str) else result
        if counted is None:
            _note_reset_fingerprint(owner, result)  # of what TRL receives, clipped
        return result

    clipped.__envlab_clipped__ = True  # type: ignore[attr-defined]  # a marker attribute on a function
    return clipped


class ClipsToolText:
    """Base for adapters: the text of `reset` and of every tool (a public method) defined on
    any subclass, generated ones included, passes through `clip_tool_text`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, member in list(vars(cls).items()):
            if (
                inspect.isfunction(member)
                and (name == "reset" or not name.startswith("_"))
                and name != "get_reward"
                and not getattr(member, "__envlab_clipped__", False)
            ):
                setattr(cls, name, _clipping(member))


class EpisodeOutcome:
    """What the trainer reads from an adapter about its current episode (and reward terms,
    envs/adapters/attributes.py, read `rewards`): cleared when an adapter is made and when
    each episode starts."""

    def _new_episode_outcome(self) -> None:
        self.reward: float = 0.0
        self.rewards: list[float | None] = []
        self.lost = False
        self.lost_reason = ""
        self.done = False
        self.tool_calls = 0
        self.tool_failures = 0


def _cap_messages(client: Any) -> Any:
    """openenv's client takes WebSocket messages of up to 100 MB; the lab takes
    ENVLAB_MAX_RESPONSE_BYTES (read when the client connects). It also follows up to ten
    redirects, which would let an allowed server send the worker on to an address the lab
    refuses: websockets reads its redirect limit per connect, and one attempt follows none.
    Its socket comes through the outbound rules (envs/adapters/pinned_ws.py)."""
    import websockets.asyncio.client

    from envs.adapters import pinned_ws

    websockets.asyncio.client.MAX_REDIRECTS = 1
    pinned_ws.install()  # and connects only to an address the outbound rules allow
    target = getattr(client, "async_client", client)
    if hasattr(target, "_max_message_size"):
        target._max_message_size = _limit("ENVLAB_MAX_RESPONSE_BYTES", DEFAULT_MAX_MESSAGE_BYTES)  # noqa: SLF001 - openenv's client has no public size setting
    return client


LOST_MESSAGE = "The episode was lost when the environment restarted; this rollout is unscored."


class EpisodeLost(RuntimeError):
    """The server no longer holds this episode (it restarted): the rollout is unscored."""

    envlab_error_class = TRANSPORT_ERROR  # unless tagged with the failed call's own class


class ResetRefused(RuntimeError):
    """The server refused to start an episode with the row's reset options (its own message)."""


class EnvironmentAtCapacity(RuntimeError):
    """The server refused a session: more rollouts at once than it takes. Ends the run.
    `capacity`: the session limit the server stated (None when it did not say); `env_name`:
    the environment's name within the run, for the worker to find its catalog row."""

    def __init__(self, message: str, *, capacity: int | None = None, env_name: str = "") -> None:
        super().__init__(message)
        self.capacity = capacity
        self.env_name = env_name


def capacity_message(cls: Any, *, learned: int | None = None) -> str:
    """Why the session was refused and what can fix it. `learned`: the limit the server stated."""
    from envs import capacity as limits  # base.py's imports are shared with other edits; no cycle

    capacity = learned if learned is not None else getattr(cls, "capacity", None)
    batch = getattr(cls, "batch_size", None)
    head = (
        f"Environment '{cls.catalog_name or cls.env_name}' at {cls.base_url} refused a session "
        f"(CAPACITY_REACHED): it takes {limits.sessions(capacity)}"
    )
    bundled = limits.adapter_reads_max_concurrent_envs(cls)
    server = limits.more_sessions_advice(reads_max_concurrent_envs=bundled)
    if capacity is not None and batch and capacity >= batch:
        # The batch fits: other runs, other processes of this one, or other clients held the rest.
        return (
            f"{head}, and all were in use: the generation batch of {batch} rollouts needs {batch}, so others "
            f"held the rest. Train when they are done, or {server}."
        )
    advice = limits.shortfall_advice(capacity=capacity, reads_max_concurrent_envs=bundled)
    rollouts = f"the generation batch of {batch} rollouts" if batch else "the generation batch"
    return f"{head}, and {rollouts} needs one each. {advice[:1].upper()}{advice[1:]}."


# How an adapter makes the episode's `reward` (the `env_reward` term's default) from the
# step rewards the server sends: their sum (the return, as gym and OpenEnv's own servers
# mean a step reward: grid_world's -0.1 a move, connect4's -1 for an illegal move), the last
# one (a server that reports the game's outcome or a running score), or the best one.
EpisodeReward = Literal["sum", "last", "max"]
EPISODE_REWARD_RULES: dict[str, str] = {
    "sum": "the sum of the episode's step rewards (negative included)",
    "last": "the last step reward of the episode",
    "max": "the best step reward of the episode",
}


def episode_reward_after(rule: str, so_far: float | None, reward: float) -> float:
    """The episode reward once a step reward of `reward` comes, under `rule`."""
    if so_far is None or rule == "last":
        return reward
    return so_far + reward if rule == "sum" else max(so_far, reward)


class OpenEnvAdapter(ClipsToolText, EpisodeOutcome):
    # The episode-reward rule (EPISODE_REWARD_RULES); envs.registry names each bundled one's.
    episode_reward: ClassVar[EpisodeReward] = "sum"
    base_url: ClassVar[str] = ""
    env_name: ClassVar[str] = ""
    # Set when the worker binds the class to a registered environment (for messages).
    catalog_name: ClassVar[str] = ""
    capacity: ClassVar[int | None] = None
    batch_size: ClassVar[int | None] = None

    def __init__(self) -> None:
        self._client: Any = None
        self._episode_id: str | None = None
        self._steps = 0
        self._new_episode_outcome()
        # Reward terms read this (envs/adapters/attributes.py) besides every step's reward:
        # the last step's metadata (numeric entries, rubric_scores, reward_signals).
        self._last_metadata: dict[str, Any] = {}

    # --- lifecycle ------------------------------------------------------------------------

    def _open_client(self) -> Any:
        raise NotImplementedError

    def _close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # a dead server cannot be closed politely
                log.debug("closing %s client failed: %s", self.env_name, exc)

    def _start(self, **reset_kwargs: Any) -> Any:
        """Close the previous episode's client, open a fresh one and reset it."""
        self._close()
        self._new_episode_outcome()
        self._steps = 0
        self._last_metadata = {}

        def attempt() -> Any:
            # A fresh session each time: one that failed to connect or reset holds nothing.
            self._close()
            self._client = LoopClient(_cap_messages(self._open_client()))
            try:
                self._client.connect()
                return self._client.reset(**reset_kwargs)
            except Exception as exc:
                if "CAPACITY_REACHED" in str(exc):
                    self._close()
                    from envs.capacity import refused_capacity

                    learned = refused_capacity(str(exc))
                    raise EnvironmentAtCapacity(
                        capacity_message(type(self), learned=learned), capacity=learned, env_name=self.env_name
                    ) from None
                raise

        result = outage.call_with_retry(attempt, env=self._outage_name(), what="reset")
        self._episode_id = (result.observation.metadata or {}).get("episode_id")
        return result

    def _outage_name(self) -> str:
        """The name the outage clock and its alert use: the catalog's, where the worker bound one."""
        return self.catalog_name or self.env_name

    def _step(self, action: Any) -> Any:
        if self.lost:
            raise EpisodeLost(LOST_MESSAGE)
        if self.done:
            raise RuntimeError("Game over.")
        self.tool_calls += 1
        try:
            result = self._client.step(action)
        except Exception as exc:
            self.tool_failures += 1
            cause = outage.note_unreachable(self._outage_name(), exc)
            if cause:
                # The session lived on the socket that failed: the server no longer holds the
                # episode, and the next reset re-opens one (retried while the server is away).
                self.lost = True
                self.lost_reason = f"step failed: the environment server was unreachable ({cause})"
                log.warning("%s: episode %s lost: %s", self.env_name, self._episode_id, self.lost_reason)
                raise toolstats.tag(EpisodeLost(LOST_MESSAGE), toolstats.error_class(exc)) from None
            gone = self._episode_gone()
            if gone:
                self.lost = True
                self.lost_reason = f"step failed ({type(exc).__name__}: {str(exc)[:200]}) and {gone}"
                log.warning("%s: episode %s lost: %s", self.env_name, self._episode_id, self.lost_reason)
                # Counted as what happened to the call (a timeout stays a timeout).
                raise toolstats.tag(EpisodeLost(LOST_MESSAGE), toolstats.error_class(exc)) from None
            raise
        metadata = result.observation.metadata or {}
        self._steps += 1
        episode = metadata.get("episode_id")
        step_count = metadata.get("step_count")
        if (self._episode_id and episode != self._episode_id) or (
            isinstance(step_count, int) and step_count != self._steps
        ):
            self.lost = True
            self.tool_failures += 1
            self.lost_reason = (
                f"the server answered for episode {episode} step {step_count}, "
                f"not {self._episode_id} step {self._steps}"
            )
            log.warning("%s: episode %s lost: %s", self.env_name, self._episode_id, self.lost_reason)
            raise EpisodeLost(LOST_MESSAGE)
        self.rewards.append(None if result.reward is None else float(result.reward))
        self._last_metadata = metadata
        if result.reward is not None:
            rewarded = any(r is not None for r in self.rewards[:-1])
            self.reward = episode_reward_after(
                self.episode_reward, self.reward if rewarded else None, float(result.reward)
            )
        self.done = bool(result.done)
        return result

    def _episode_gone(self) -> str:
        """After a failed step: why the server no longer holds this episode, or "" if it does.
        Unknown counts as gone: an unscored rollout is safe, one scored on another episode is not."""
        try:
            state = self._client.state(timeout=10)
        except Exception as exc:
            return f"its state could not be read ({type(exc).__name__}: {str(exc)[:200]})"
        episode = getattr(state, "episode_id", None)
        if episode is None and isinstance(state, dict):
            episode = state.get("episode_id")
        if self._episode_id and episode != self._episode_id:
            return f"the server now holds episode {episode}"
        return ""

    def __del__(self) -> None:
        client, self._client = getattr(self, "_client", None), None
        if client is not None:
            try:
                client.close_soon()
            except Exception:  # best effort while being collected
                pass
