"""Open Reward Standard (ORS) environments as TRL sees them.

`ors_adapter_class(...)` asks an ORS server for an environment's tools and builds a class
for TRL's `environment_factory`: a no-argument constructor, `reset(**row)` that opens a
fresh session on the row's `task_index`, and one typed, documented method per ORS tool.
`ors_rows(...)` builds the matching dataset rows, the task's prompt included.

Built on the openreward SDK's async client, not on TRL's `OpenRewardSpec` (see
envs/ors/NOTES.md for why). The SDK is imported lazily: importing it costs seconds.

Episode reward: `reward` is the last non-null per-call reward (0.0 before any), TRL's
`OpenRewardSpec` convention; `rewards` keeps every call's reward in order. A session the
server no longer knows (it restarted), a transport failure or a tool that crashed on the
server sets `lost`: the call raises `EpisodeLost` and the rollout is unscored.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import keyword
import logging
import os
import re
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

from envs import netguard
from envs.adapters import outage, toolstats
from envs.adapters.base import ClipsToolText, EpisodeLost, EpisodeOutcome, clip_tool_text
from envs.adapters.ors_limits import cap_api_sessions, cap_pinger
from envs.adapters.tool_metrics import (
    EXECUTION_ERROR,
    INVALID_ARGS,
    TIMEOUT,
    TOOL_NOT_FOUND,
    TRANSPORT_ERROR,
)
from envs.adapters.typed_tools import docstring, make_tool, one_line, typed_parameters

log = logging.getLogger(__name__)

T = TypeVar("T")

# Names TRL or our reward terms read on an adapter instance: a tool may not shadow them.
RESERVED_NAMES = frozenset(
    {"reset", "get_reward", "reward", "rewards", "lost", "done", "tool_calls", "tool_failures"}
    | {"env_name", "base_url", "split", "splits", "tool_names"}
)
_ENV_NAME = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?$")
_DOC_SECTION = re.compile(r"(Args:|Returns:|Raises:)")
SETUP_TIMEOUT_S = 120.0  # open/close a session, list tools or tasks
CALL_TIMEOUT_S = 600.0  # one tool call; the SDK itself retries transport errors for ~15 s
MAX_ERROR_CHARS = 1000  # a refused call's message goes back to the model


# --- the SDK's event loop --------------------------------------------------------------


class _SdkLoop:
    """One event-loop thread per process for the async SDK, with timeouts on every call.

    The SDK's own sync wrappers wait without a timeout; this one never hangs a rollout
    (or interpreter shutdown) on a dead loop or server.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="envlab-ors", daemon=True)
        self.thread.start()
        self.apis: dict[tuple[str, str | None], Any] = {}  # only touched on the loop thread

    def alive(self) -> bool:
        return self.thread.is_alive() and not self.loop.is_closed()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the ORS server did not answer within {timeout:.0f} s") from None


_loop_lock = threading.Lock()
_loop: _SdkLoop | None = None


def _sdk_loop() -> _SdkLoop:
    """The process's loop; a forked child (a Celery pool worker) gets its own."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.pid != os.getpid() or not _loop.alive():
            _loop = _SdkLoop()
        return _loop


# --- where an environment lives ------------------------------------------------------


def _guarded_connector() -> Any:
    """An aiohttp connector that checks every address it connects to against the lab's
    outbound rules (envs.netguard), IP literals included.

    The SDK follows redirects (aiohttp's default) and has no option to stop it; checking at
    the connector catches every hop, the first one and any redirect's, before a byte is sent.
    `_resolve_host` is aiohttp's resolution step for every new connection (aiohttp 3.14).
    """
    import aiohttp

    class GuardedConnector(aiohttp.TCPConnector):
        async def _resolve_host(self, host: str, port: int, traces: Any = None) -> Any:
            results = await super()._resolve_host(host, port, traces)
            for result in results:
                refusal = netguard.address_refusal(str(result["host"]))
                if refusal is not None:
                    raise OSError(f"{host} is refused: {refusal}")
            return results

    return GuardedConnector(limit=1_000_000)


def _guard_connections(api: Any) -> None:
    """Give the SDK's environments API (its env-server and API sessions) the guarded connector."""

    def get_connector() -> Any:
        if api._connector is None or api._connector.closed:  # noqa: SLF001 - openreward has no public connector hook
            api._connector = _guarded_connector()  # noqa: SLF001 - openreward has no public connector hook
        return api._connector  # noqa: SLF001 - openreward has no public connector hook

    api._get_connector = get_connector  # noqa: SLF001 - openreward has no public connector hook


@dataclass(frozen=True)
class OrsTarget:
    """One environment on one ORS server, with the key for it: a user's own (`api_key`, kept
    out of repr so no log or traceback shows it) or a variable the operator allowed."""

    base_url: str
    env_name: str
    split: str = "train"
    api_key_env: str | None = None
    api_key_value: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def parse(
        cls, *, base_url: str, env_name: str, split: str, api_key_env: str | None,
        api_key: str | None = None,
    ) -> OrsTarget:
        parts = urlsplit((base_url or "").strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if parts.path.strip("/") or parts.query or parts.fragment:
            # The SDK sends absolute paths ("/create_session"), which drop any prefix.
            raise ValueError(f"base_url must be a server origin without a path, got {base_url!r}")
        if not _ENV_NAME.match(env_name or ""):
            raise ValueError(
                f"env_name must be a server environment name or 'owner/name', got {env_name!r}"
            )
        if not split or not isinstance(split, str):
            raise ValueError("split must be a non-empty string")
        if api_key is None and api_key_env is not None and not os.environ.get(api_key_env):
            raise ValueError(
                "no Open Reward API key for this run: store yours on your account page, or ask the "
                f"operator to set {api_key_env} for the workers"
            )
        # No trailing slash: the SDK builds its keep-alive URL as f"{base_url}/ping".
        return cls(f"{parts.scheme}://{parts.netloc}", env_name, split, api_key_env, api_key)

    def api_key(self) -> str | None:
        if self.api_key_value is not None:
            return self.api_key_value
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    async def environment(self) -> Any:
        """The SDK's environment handle (create it on the loop thread: aiohttp needs a loop).

        A plain name is one environment of a self-hosted server (the path prefix
        ``/{env_name}``); ``owner/name`` is a catalog deployment (``X-Deployment``).
        """
        from openreward import AsyncEnvironmentsAPI

        apis = _sdk_loop().apis
        key = (self.base_url, self.api_key())
        if key not in apis:
            # Passing the URLs here is the single-host override: no OPENREWARD_*_URL needed.
            api = AsyncEnvironmentsAPI(self.base_url, key[1], api_base_url=self.base_url)
            _guard_connections(api)
            apis[key] = api
        if "/" in self.env_name:
            environment = apis[key].get(self.env_name)
        else:
            environment = apis[key].get(self.env_name, variant=self.env_name)
        # `get` opens the API's sessions: no answer on them is read past the lab's cap.
        cap_api_sessions(apis[key])
        cap_pinger(_guarded_connector)
        return environment

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = SETUP_TIMEOUT_S) -> T:
        return _sdk_loop().run(coro, timeout)

    def describe_error(self, exc: BaseException) -> str:
        status = getattr(exc, "status", None)
        detail = getattr(exc, "message", None) if status is not None else None
        text = f"HTTP {status}: {detail}" if status is not None else f"{type(exc).__name__}: {exc}"
        return f"ORS environment {self.env_name!r} at {self.base_url}: {text}"


# --- dataset rows ----------------------------------------------------------------------


def _blocks_text(blocks: Sequence[Any]) -> str:
    return "\n".join(str(b.text) for b in blocks if getattr(b, "type", None) == "text" and b.text)


async def _prompt_text(target: OrsTarget, index: int) -> str:
    """A task's prompt: the SDK serves it only inside a session on that task."""
    session = (await target.environment()).session(split=target.split, index=index)
    await session.__aenter__()
    try:
        return clip_tool_text(_blocks_text(await session.get_prompt()))  # the server's text: bounded
    finally:
        await session.__aexit__(None, None, None)


MAX_LISTED_TASKS = 10_000


async def _rows(
    target: OrsTarget, num_tasks: int | None, indices: list[int] | None
) -> list[dict[str, Any]]:
    env = await target.environment()
    if target.split not in await env.list_splits():
        raise ValueError(f"{target.env_name!r} has no split {target.split!r}")
    total = await env.num_tasks(target.split)
    if indices is not None:
        bad = [
            i
            for i in indices
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < total
        ]
        if bad:
            raise ValueError(
                f"task indices {bad} are outside split {target.split!r} (0..{total - 1})"
            )
        chosen = list(indices)
    else:
        # The server says how many tasks it has, and reading each opens a session: a run
        # lists at most MAX_LISTED_TASKS (also the run config's cap on num_tasks and indices).
        chosen = list(range(min(total if num_tasks is None else num_tasks, total, MAX_LISTED_TASKS)))
    limit = asyncio.Semaphore(8)

    async def one(index: int) -> str:
        async with limit:
            return await _prompt_text(target, index)

    prompts = await asyncio.gather(*(one(i) for i in chosen))
    return [
        {
            "prompt": [{"role": "user", "content": text}],
            "task_index": index,
            "split": target.split,
            "env": target.env_name,
        }
        for index, text in zip(chosen, prompts, strict=True)
    ]


def ors_rows(
    *,
    base_url: str,
    env_name: str,
    split: str = "train",
    num_tasks: int | None = None,
    indices: list[int] | None = None,
    api_key_env: str | None = None,
    api_key: str | None = None,
) -> list[dict[str, Any]]:
    """Dataset rows for an ORS split: ``prompt`` (the task's prompt as one user message),
    ``task_index`` (what `reset` opens), ``split`` and ``env``.

    ``num_tasks`` takes the first tasks (capped at the split's size); ``indices`` picks
    tasks; give at most one. Opens one short session per task to read its prompt.
    """
    if num_tasks is not None and indices is not None:
        raise ValueError("give num_tasks or indices, not both")
    if num_tasks is not None and (
        isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 1
    ):
        raise ValueError(f"num_tasks must be a positive integer, got {num_tasks!r}")
    target = OrsTarget.parse(
        base_url=base_url, env_name=env_name, split=split, api_key_env=api_key_env, api_key=api_key
    )
    try:
        return target.run(_rows(target, num_tasks, indices), timeout=SETUP_TIMEOUT_S * 4)
    except ValueError:
        raise
    except Exception as exc:
        raise _setup_error(target, exc) from exc


def _setup_error(target: OrsTarget, exc: BaseException) -> Exception:
    """404 names something the server does not have (a caller's mistake); else unreachable."""
    if getattr(exc, "status", None) != 404:
        return RuntimeError(target.describe_error(exc))
    served = _served_environments(target.base_url) if "/" not in target.env_name else None
    if served is not None and target.env_name.lower() not in served:
        return ValueError(
            f"ORS server {target.base_url} has no environment {target.env_name!r}; it serves {served}"
        )
    return ValueError(target.describe_error(exc))


def _served_environments(base_url: str) -> list[str] | None:
    """``GET /list_environments`` of a self-hosted ORS server (None if it does not answer)."""
    try:
        url = netguard.check_outbound_url(f"{base_url}/list_environments")
        # No redirect followed, no proxy, a capped body: the answer only names environments.
        with netguard.opener().open(url, timeout=5) as response:
            names = json.loads(netguard.read_capped(response))
    except (OSError, ValueError):
        return None
    return [str(n)[:100] for n in names[:100]] if isinstance(names, list) else None


# --- tool methods from JSON schemas ----------------------------------------------------


def _tool_method(spec: Any) -> Callable[..., str]:
    """A method with the tool's own name and argument names, typed from its input schema
    (envs/adapters/typed_tools.py, as the generic adapters are), so that
    ``transformers.utils.get_json_schema`` (what TRL shows the model) describes it exactly."""
    name = spec.name
    if (
        not name.isidentifier()
        or keyword.iskeyword(name)
        or name.startswith("_")
        or name in RESERVED_NAMES
    ):
        raise ValueError(
            f"ORS tool name {name!r} cannot be a Python method (or shadows an adapter attribute)"
        )
    schema = spec.input_schema or {}
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties") or {}, Mapping):
        raise ValueError(f"ORS tool {name!r} has a malformed input schema")
    parameters, _, arg_docs = typed_parameters(
        schema.get("properties") or {},
        set(schema.get("required") or []),
        schema.get("$defs") or {},
        exact_names=f"ORS tool {name!r}",
    )
    summary = one_line(_DOC_SECTION.split(spec.description or "")[0].strip() or f"Call the {name} tool.")
    doc = docstring(summary, arg_docs, "The tool's result as text.")

    # The tool method's body (typed_tools.make_tool): self is the adapter it is called on.
    def call(self: OrsAdapter, arguments: dict[str, Any]) -> str:
        return self._call_tool(name, arguments)

    return make_tool(name, name, doc, parameters, call)


# --- the adapter -----------------------------------------------------------------------


class OrsAdapter(ClipsToolText, EpisodeOutcome):
    """One rollout's ORS session. Build subclasses with `ors_adapter_class`."""

    env_name: ClassVar[str] = ""  # a label (the run's name for the environment)
    catalog_name: ClassVar[str] = ""  # the catalog's name, where the worker bound one (for outages)
    base_url: ClassVar[str] = ""
    split: ClassVar[str] = "train"  # for rows without a "split"
    splits: ClassVar[tuple[str, ...]] = ()
    tool_names: ClassVar[tuple[str, ...]] = ()
    _target: ClassVar[OrsTarget | None] = None

    def __init__(self) -> None:
        if self._target is None:
            raise TypeError("OrsAdapter is abstract: build a class with ors_adapter_class(...)")
        self._session: Any = None
        self._task_index: int | None = None
        self._new_episode_outcome()

    def reset(self, **row: Any) -> str | None:
        """Close the previous session and open one on ``row["task_index"]`` of
        ``row["split"]`` (default: the class's split).

        Returns None when the row's prompt already holds the task's prompt (rows from
        `ors_rows`), else the task's prompt after a newline.
        """
        target = self._target
        assert target is not None
        index = row.get("task_index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"an ORS row needs a non-negative integer 'task_index', got {index!r}")
        split = row.get("split") or target.split
        if split not in self.splits:
            raise ValueError(
                f"row asks for split {split!r}; {self.env_name!r} has {list(self.splits)}"
            )
        self._close()
        self._new_episode_outcome()
        self._task_index = index
        try:
            # A fresh session each attempt, retried while the server is out of reach (envs/adapters/outage.py).
            self._session, prompt = outage.call_with_retry(
                lambda: target.run(self._open(target, split, index)),
                env=self.catalog_name or self.env_name, what=f"opening a session on task {index}",
            )
        except outage.EnvironmentUnreachable:
            raise
        except Exception as exc:
            raise RuntimeError(
                f"cannot open a session on task {index}: {target.describe_error(exc)}"
            ) from exc
        return None if prompt and prompt in _row_text(row) else "\n" + prompt

    @staticmethod
    async def _open(target: OrsTarget, split: str, index: int) -> tuple[Any, str]:
        session = (await target.environment()).session(split=split, index=index)
        await session.__aenter__()
        try:
            return session, _blocks_text(await session.get_prompt())
        except BaseException:
            await session.__aexit__(None, None, None)
            raise

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        from openreward.api.errors import ToolCallError

        target = self._target
        assert target is not None
        if self.lost:
            raise EpisodeLost("The ORS session was lost; this rollout is unscored.")
        if self._session is None:
            raise RuntimeError("No episode in progress: reset() opens one.")
        if self.done:
            raise RuntimeError("Game over.")
        self.tool_calls += 1
        try:
            out = target.run(self._session.call_tool(name, arguments), timeout=CALL_TIMEOUT_S)
        except ToolCallError as exc:
            # Refused before running: bad arguments, or the episode is already over.
            self.tool_failures += 1
            if exc.reason == "episode_finished":
                self.done = True
                raise RuntimeError("Game over.") from None
            refused = ValueError(exc.detail[:MAX_ERROR_CHARS])
            raise toolstats.tag(refused, _REFUSAL_CLASSES.get(exc.reason, INVALID_ARGS)) from None
        except Exception as exc:
            # 404/410 (the server forgot the session: it restarted), transport failure,
            # timeout, or a tool that crashed server-side (the SDK kills the session, so the
            # call is not retried on it; the next reset opens a fresh one, retried while the
            # server is out of reach).
            self.tool_failures += 1
            self.lost = True
            self.lost_reason = f"the ORS session was lost ({target.describe_error(exc)})"[:500]
            outage.note_unreachable(self.catalog_name or self.env_name, exc)
            log.warning(
                "%s: session on task %s lost: %s",
                self.env_name,
                self._task_index,
                target.describe_error(exc),
            )
            lost = EpisodeLost(
                f"The ORS session was lost ({target.describe_error(exc)}); this rollout is unscored."
            )
            raise toolstats.tag(lost, _lost_call_class(exc)) from exc
        reward = None if out.reward is None else float(out.reward)
        self.rewards.append(reward)
        if reward is not None:
            self.reward = reward
        self.done = bool(out.finished)
        return _blocks_text(out.blocks or []) or "(no output)"

    def _close(self) -> None:
        """End the session without waiting: the server's answer changes nothing here, and
        a dead server would hold the next reset for the SDK's retries (seconds)."""
        session, self._session = self._session, None
        loop = _loop
        if session is None or loop is None or loop.pid != os.getpid() or not loop.alive():
            return  # no loop to run on: the server reaps sessions idle for 15 minutes
        future = asyncio.run_coroutine_threadsafe(session.__aexit__(None, None, None), loop.loop)
        env_name = self.env_name

        def report(done: concurrent.futures.Future[None]) -> None:
            if not done.cancelled() and done.exception() is not None:
                log.debug("closing %s session failed: %s", env_name, done.exception())

        future.add_done_callback(report)

    def __del__(self) -> None:
        try:
            self._close()
        except Exception:  # never raise from a finaliser
            pass


# Why the SDK refused a call (openreward.api.errors.ToolCallErrorReason), as error classes.
_REFUSAL_CLASSES = {"not_found": TOOL_NOT_FOUND, "name_collision": EXECUTION_ERROR}


def _lost_call_class(exc: BaseException) -> str:
    """The class of a call that lost its session: the SDK's exception says what happened."""
    from openreward.api.errors import (
        HeartbeatTimeoutError,
        SessionTerminatedError,
        ToolFailed,
        TransportError,
    )

    if isinstance(exc, ToolFailed):  # the tool ran on the server and raised
        return EXECUTION_ERROR
    if isinstance(exc, HeartbeatTimeoutError):
        return TIMEOUT
    if isinstance(exc, TransportError | SessionTerminatedError):  # the server forgot the session
        return TRANSPORT_ERROR
    return toolstats.error_class(exc)  # our timeout, a connection refused


def _row_text(row: Mapping[str, Any]) -> str:
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        return prompt
    parts: list[str] = []
    for message in prompt or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
    return "\n".join(parts)


async def _describe(target: OrsTarget) -> tuple[list[str], list[Any], Any]:
    env = await target.environment()
    return await env.list_splits(), await env.list_tools(), await env.terminal_tool()


def ors_adapter_class(
    *, base_url: str, env_name: str, split: str = "train", api_key_env: str | None = None,
    api_key: str | None = None,
) -> type[OrsAdapter]:
    """An `environment_factory` class for one ORS environment: one method per shared ORS tool.

    ``env_name`` is an environment on a self-hosted server (``guessnumber``) or a catalog
    deployment (``owner/name``, with ``base_url`` the sessions host and ``api_key_env``
    naming the variable that holds the key). Asks the server for its splits and tools now.
    """
    target = OrsTarget.parse(
        base_url=base_url, env_name=env_name, split=split, api_key_env=api_key_env, api_key=api_key
    )
    try:
        splits, tools, terminal = target.run(_describe(target))
    except Exception as exc:
        raise _setup_error(target, exc) from exc
    if split not in splits:
        raise ValueError(f"{env_name!r} has no split {split!r}; it has {splits}")
    if terminal is not None:
        raise ValueError(
            f"{env_name!r} grades through the @terminal tool {terminal.name!r}, which TRL's tool "
            "loop never calls: its rollouts would never be scored"
        )
    if not tools:
        raise ValueError(f"{env_name!r} lists no tools")
    methods = {spec.name: _tool_method(spec) for spec in tools}
    class_name = (
        "Ors"
        + "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", env_name) if p)
        + "Adapter"
    )
    cls = type(
        class_name,
        (OrsAdapter,),
        {
            "env_name": env_name,
            "base_url": target.base_url,
            "split": split,
            "splits": tuple(splits),
            "tool_names": tuple(methods),
            "_target": target,
            "__module__": __name__,
            **methods,
        },
    )
    for name, method in methods.items():
        method.__qualname__ = f"{class_name}.{name}"
    return cls
