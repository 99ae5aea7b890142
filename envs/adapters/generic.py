"""Training adapters generated at run time for any OpenEnv server, of either style.

OpenEnv servers come in two styles:

* **classic**: a typed ``Action`` model described by ``GET /schema``.
  ``classic_adapter_class`` turns it into ONE tool named after the action: the action's
  title without its ``Action`` suffix, in snake case (``EchoAction`` -> ``echo``;
  ``MoveAction`` -> ``move``). Where that name is empty or taken by the adapter itself
  (``reset``, ``reward``, ``done``...), the tool is ``<env_name>_step``. Its parameters
  are the action's fields except ``metadata`` (fields with a ``const`` value are sent
  automatically); it returns the observation as text, with the reward and ``done``.
* **mcp**: an ``MCPEnvironment`` whose tools are listed and called with openenv's
  ``ListToolsAction`` / ``CallToolAction``. ``mcp_adapter_class`` makes one method per
  tool, named after it (made a valid public identifier where needed), typed from its
  ``inputSchema``; it returns the tool's result as text.

Both step the episode over the WebSocket ``/ws`` with a fresh client per episode (see
``OpenEnvAdapter``): a ``CallToolAction`` is sent as a plain step,
``{"type": "call_tool", "tool_name": ..., "arguments": {...}}``, so tool state lives in
the episode's server-side environment and the server can attach a reward. (HTTP
``POST /mcp`` without a session works on a throwaway environment, and with one it
bypasses ``step``: no reward.)

``detect_openenv_style``, ``fetch_schema`` and ``list_mcp_tools`` are for registration
time in the web app: plain ``urllib``, no openenv import (importing ``openenv.core``
pulls in FastAPI and FastMCP, several seconds), a timeout on every request.

The generated methods are closures with a real ``__signature__``, ``__annotations__``
and Google-style docstring, so ``transformers.utils.get_json_schema`` (what TRL uses)
describes them; nothing is ``eval``-ed or ``exec``-ed.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, Literal

from envs import netguard
from envs.adapters import toolstats
from envs.adapters.base import LOST_MESSAGE, EpisodeLost, OpenEnvAdapter, ResetRefused
from envs.adapters.tool_metrics import ERROR_CLASSES, EXECUTION_ERROR, UNKNOWN_TOOL
from envs.adapters.typed_tools import (
    docstring,
    identifier,
    make_tool,
    one_line,
    typed_parameters,
    unique,
)
from envs.rows import reset_options

log = logging.getLogger(__name__)

OpenEnvStyle = Literal["classic", "mcp"]

DEFAULT_TIMEOUT_S = 5.0
# None: a row's seed and every reset option (envs/rows.py) reach the server's reset.
DEFAULT_RESET_KEYS: tuple[str, ...] | None = None
MCP_ACTION_TITLES = frozenset({"CallToolAction", "ListToolsAction"})
MCP_ACTION_TYPES = frozenset({"call_tool", "list_tools"})

# How openenv's EnvClient words a server's error frame (`_send_and_receive`).
SERVER_ERROR_PREFIX = "Server error: "
MAX_ERROR_DETAILS = 10

_OUTCOME_KEYS = frozenset({"reward", "done", "metadata"})
_BOOKKEEPING_KEYS = frozenset({"episode_id", "step_count"})
# Names TRL would not offer as tools or that an adapter instance already uses.
_TAKEN_NAMES = frozenset(
    {"reset", "get_reward", "reward", "lost", "done", "tool_calls", "tool_failures"}
    | {name for name in dir(OpenEnvAdapter) if not name.startswith("_")}
)


# --- registration-time probes (no openenv import) ------------------------------------------


def fetch_schema(base_url: str, *, timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """``GET /schema`` of an OpenEnv server: ``{"action": {...}, "observation": {...}, ...}``.

    Raises:
        ConnectionError: the server cannot be reached (or timed out).
        ValueError: the URL is not http(s), or the answer is not an OpenEnv schema.
    """
    url = f"{http_base(base_url)}/schema"
    answer = request_json(url, timeout=timeout)
    if not isinstance(answer, dict) or not isinstance(answer.get("action"), dict):
        raise ValueError(
            f"GET {url} is not an OpenEnv schema: expected an object with an 'action' JSON "
            "schema. Is this an OpenEnv environment server?"
        )
    return answer


def list_mcp_tools(base_url: str, *, timeout: float = DEFAULT_TIMEOUT_S) -> list[dict[str, Any]]:
    """The server's MCP tools (JSON-RPC ``tools/list`` on ``POST /mcp``).

    Returns ``[{"name": str, "description": str, "inputSchema": dict}, ...]``.

    Raises:
        ConnectionError: the server cannot be reached (or timed out).
        ValueError: the server refuses ``tools/list`` (a classic environment answers
            "Environment does not support MCP") or answers something else.
    """
    url = f"{http_base(base_url)}/mcp"
    request = {"jsonrpc": "2.0", "method": "tools/list", "params": {}, "id": 1}
    answer = request_json(url, body=request, timeout=timeout)
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0":
        raise ValueError(f"POST {url} did not answer JSON-RPC 2.0; is this an OpenEnv server?")
    if answer.get("error") is not None:
        error = answer["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise ValueError(f"POST {url} refused tools/list: {message}")
    result = answer.get("result")
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        raise ValueError(f"POST {url} answered tools/list without a list of tools")
    listed = []
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise ValueError(f"POST {url} listed a tool without a name: {tool!r:.200}")
        schema = _input_schema(tool)
        if not isinstance(schema, dict):
            raise ValueError(f"POST {url} listed tool {tool['name']!r} with a bad inputSchema")
        listed.append(
            {
                "name": tool["name"],
                "description": tool.get("description") or "",
                "inputSchema": schema,
            }
        )
    return listed


def detect_openenv_style(base_url: str, *, timeout: float = DEFAULT_TIMEOUT_S) -> OpenEnvStyle:
    """``"mcp"`` if the server's action is openenv's ``CallToolAction``/``ListToolsAction``
    (or it has no fields and ``/mcp`` lists tools), ``"classic"`` if it is a typed action.

    Raises:
        ConnectionError: the server cannot be reached (or timed out).
        ValueError: not an OpenEnv server, or one with neither action fields nor tools.
    """
    action = fetch_schema(base_url, timeout=timeout)["action"]
    if _is_mcp_action(action):
        return "mcp"
    if _action_fields(action):
        return "classic"
    try:
        tools = list_mcp_tools(base_url, timeout=timeout)
    except ValueError as exc:
        raise ValueError(f"{base_url}: the action has no fields and {exc}") from None
    if not tools:
        raise ValueError(f"{base_url}: the action has no fields and /mcp lists no tools")
    return "mcp"


# --- adapter classes ------------------------------------------------------------------------


def classic_adapter_class(
    *,
    base_url: str,
    env_name: str,
    schema: Mapping[str, Any],
    description: str = "",
    reset_keys: Sequence[str] | None = DEFAULT_RESET_KEYS,
) -> type[OpenEnvAdapter]:
    """An adapter class with one tool built from a classic server's action schema.

    ``schema`` is the ``/schema`` answer or just its ``action`` part. ``description``
    (e.g. the server's ``/metadata`` description) is added to the tool's description.
    ``reset_keys``: by default (None) the row's seed and every reset option (every column
    that envlab does not set itself, envs/rows.py) are passed to the server's reset; a
    sequence passes only those row keys. openenv's server drops keys its environment's
    reset does not name unless it takes ``**kwargs``.

    Raises:
        ValueError: the schema is not a classic action schema.
    """
    action = schema.get("action") if isinstance(schema.get("action"), Mapping) else schema
    if not isinstance(action, Mapping) or not isinstance(action.get("properties", {}), Mapping):
        raise ValueError("schema must be an OpenEnv action JSON schema with 'properties'")
    if _is_mcp_action(action):
        raise ValueError("this is an MCP-style environment (CallToolAction): use mcp_adapter_class")
    fields = _action_fields(action)
    if not fields:
        raise ValueError("the action schema has no fields besides metadata: nothing to call")
    defs = action.get("$defs") or {}
    fixed = {name: prop["const"] for name, prop in fields.items() if "const" in prop}
    open_fields = {name: prop for name, prop in fields.items() if "const" not in prop}
    parameters, wire_names, arg_docs = typed_parameters(
        open_fields, set(action.get("required") or ()), defs
    )

    title = str(action.get("title") or "")
    tool_name = _snake(title.removesuffix("Action"))
    if not tool_name or tool_name in _TAKEN_NAMES:
        tool_name = f"{_snake(env_name) or 'env'}_step"
    summary = _tool_summary(
        one_line(str(action.get("description") or f"Act in the {env_name} environment.")),
        one_line(description),
    )
    doc = docstring(
        summary,
        arg_docs,
        "The observation as text, with the reward and whether the episode is done.",
    )

    # The tool method's body (typed_tools.make_tool): self is the adapter it is called on.
    def call(self: _GenericAdapter, arguments: dict[str, Any]) -> str:
        payload = {**fixed, **{wire_names[name]: value for name, value in arguments.items()}}
        result = self._step(payload)
        self._check_episode(result)
        lines = _render_fields(result.observation.fields)
        if result.reward is not None:
            lines.append(f"reward: {result.reward}")
        lines.append(f"done: {'true' if result.done else 'false'}")
        return "\n".join(lines)

    class_name = f"{_camel(env_name)}ClassicAdapter"
    tool = make_tool(tool_name, f"{class_name}.{tool_name}", doc, parameters, call)
    return _adapter_type(class_name, base_url, env_name, reset_keys, {tool_name: tool})


def mcp_adapter_class(
    *,
    base_url: str,
    env_name: str,
    tools: Sequence[Mapping[str, Any]],
    reset_keys: Sequence[str] | None = DEFAULT_RESET_KEYS,
) -> type[OpenEnvAdapter]:
    """An adapter class with one method per MCP tool (``list_mcp_tools`` gives ``tools``).

    A method is named after its tool; a name that is not a valid public identifier, or
    that the adapter uses itself, is changed (``get-weather`` -> ``get_weather``,
    ``done`` -> ``done_tool``). A tool error (``CallToolObservation.error`` or an
    ``is_error`` result) is raised as ``RuntimeError`` and counted in ``tool_failures``.

    Raises:
        ValueError: no tools, or a tool without a name or with a malformed inputSchema.
    """
    if not tools:
        raise ValueError("an MCP adapter needs at least one tool")
    checked: list[tuple[str, Mapping[str, Any], str]] = []
    for tool in tools:
        raw_name = tool.get("name") if isinstance(tool, Mapping) else None
        if not isinstance(raw_name, str) or not raw_name.strip():
            raise ValueError(f"every MCP tool needs a name, got {tool!r:.200}")
        schema = _input_schema(tool)
        if not isinstance(schema, Mapping) or not isinstance(schema.get("properties", {}), Mapping):
            raise ValueError(f"MCP tool {raw_name!r} has a malformed inputSchema")
        checked.append((raw_name, schema, str(tool.get("description") or "")))
    class_name = f"{_camel(env_name)}McpAdapter"
    methods: dict[str, Callable[..., str]] = {}
    names = _method_names([raw_name for raw_name, _, _ in checked])
    for (raw_name, schema, description), name in zip(checked, names, strict=True):
        parameters, wire_names, arg_docs = typed_parameters(
            schema.get("properties") or {},
            set(schema.get("required") or ()),
            schema.get("$defs") or {},
        )
        summary = one_line(description or f"Call the {raw_name} tool.")
        doc = docstring(summary, arg_docs, "The tool's result as text.")
        methods[name] = make_tool(
            name, f"{class_name}.{name}", doc, parameters, _mcp_call(raw_name, wire_names)
        )
    return _adapter_type(class_name, base_url, env_name, reset_keys, methods)


def adapter_class_for_server(
    *,
    base_url: str,
    env_name: str,
    timeout: float = DEFAULT_TIMEOUT_S,
    reset_keys: Sequence[str] | None = DEFAULT_RESET_KEYS,
) -> type[OpenEnvAdapter]:
    """Detect the server's style and build the matching adapter class from what it describes."""
    if detect_openenv_style(base_url, timeout=timeout) == "mcp":
        tools = list_mcp_tools(base_url, timeout=timeout)
        return mcp_adapter_class(
            base_url=base_url, env_name=env_name, tools=tools, reset_keys=reset_keys
        )
    try:
        metadata = request_json(f"{http_base(base_url)}/metadata", timeout=timeout)
    except (ValueError, ConnectionError):
        metadata = {}  # the description is a nicety; /schema already answered
    description = metadata.get("description") if isinstance(metadata, dict) else None
    return classic_adapter_class(
        base_url=base_url,
        env_name=env_name,
        schema=fetch_schema(base_url, timeout=timeout),
        description=description if isinstance(description, str) else "",
        reset_keys=reset_keys,
    )


# --- the shared adapter ---------------------------------------------------------------------


@dataclass(frozen=True)
class _WireObservation:
    """An observation as it came over the wire: its own fields, and its metadata."""

    fields: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@cache
def _wire_client_class() -> type:
    # Imported here: openenv.core costs seconds and must stay out of registration-time imports.
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient

    class WireEnvClient(EnvClient[dict, _WireObservation, dict]):
        """Dict actions out, ``_WireObservation`` back: no environment package needed."""

        def _step_payload(self, action: dict) -> dict[str, Any]:
            return dict(action)

        def _parse_result(self, payload: dict[str, Any]) -> StepResult[_WireObservation]:
            body = payload.get("observation")
            body = body if isinstance(body, dict) else {"observation": body}
            metadata = payload.get("metadata") or body.get("metadata") or {}
            observation = _WireObservation(
                fields={k: v for k, v in body.items() if k not in _OUTCOME_KEYS},
                metadata=metadata if isinstance(metadata, dict) else {},
            )
            return StepResult(
                observation=observation,
                reward=payload.get("reward"),
                done=bool(payload.get("done", False)),
                metadata=observation.metadata,
            )

        def _parse_state(self, payload: dict[str, Any]) -> dict[str, Any]:
            return payload if isinstance(payload, dict) else {}

        async def _receive(self) -> dict[str, Any]:
            response = await super()._receive()
            # openenv's client keeps only an error frame's `message`; a validation error's
            # message is just "Invalid message" and its `errors` say what was wrong.
            data = response.get("data") if isinstance(response, dict) else None
            if response.get("type") == "error" and isinstance(data, dict):
                details = error_details(data.get("errors"))
                if details:
                    data["message"] = f"{data.get('message') or 'error'}: {details}"
            return response

    return WireEnvClient


class _GenericAdapter(OpenEnvAdapter):
    """What both generated styles share: reset from a dataset row, episode checks."""

    _reset_keys: ClassVar[tuple[str, ...] | None] = DEFAULT_RESET_KEYS

    def __init__(self) -> None:
        super().__init__()
        self._state_episode_id: str | None = None

    def _open_client(self) -> Any:
        return _wire_client_class()(base_url=self.base_url, mode="simulation").sync()

    def reset(self, **row: Any) -> str | None:
        if self._reset_keys is None:
            kwargs = reset_options(row)
        else:
            kwargs = {key: row[key] for key in self._reset_keys if row.get(key) is not None}
        try:
            result = self._start(**kwargs)
        except ResetRefused:
            raise
        except RuntimeError as exc:
            # The server's own words: a reset option it refuses (reasoning_gym's unknown
            # dataset, chess's bad FEN) fails the episode at once, saying what to fix.
            if not str(exc).startswith(SERVER_ERROR_PREFIX):
                raise
            name = self.catalog_name or self.env_name
            raise ResetRefused(_reset_refusal(name, kwargs, str(exc))) from None
        self._state_episode_id = None
        if self._episode_id is None:
            # No episode id in the observations: fall back on the server's state, one extra
            # round trip per call, to notice a restarted server's fresh environment.
            try:
                episode = self._client.state().get("episode_id")
            except Exception as exc:  # a server without state: no lost-episode detection
                log.debug("%s: no state after reset: %s", self.env_name, exc)
                episode = None
            self._state_episode_id = episode if isinstance(episode, str) and episode else None
        observation = result.observation
        lines = _render_fields(observation.fields) or _render_fields(
            {k: v for k, v in observation.metadata.items() if k not in _BOOKKEEPING_KEYS}
        )
        return "\n" + "\n".join(lines) if lines else None

    def __del__(self) -> None:
        # At interpreter exit openenv's sync client would start a thread to close its loop,
        # and a thread started then never runs: the process would hang forever.
        if not sys.is_finalizing():
            super().__del__()

    def _check_episode(self, result: Any) -> None:
        if self._state_episode_id is None or result.observation.metadata.get("episode_id"):
            return
        try:
            episode = self._client.state().get("episode_id")
        except Exception:
            self.tool_failures += 1
            raise
        if episode != self._state_episode_id:
            self.lost = True
            self.tool_failures += 1
            log.warning(
                "%s: episode %s lost (state names %s)",
                self.env_name,
                self._state_episode_id,
                episode,
            )
            raise EpisodeLost(LOST_MESSAGE)


# openenv's default `/metadata` description, "<EnvironmentClass> environment": it says nothing
# the tool's own description does not.
_PLACEHOLDER_DESCRIPTION = re.compile(r"^\w+ environment$", re.IGNORECASE)


def _tool_summary(summary: str, description: str) -> str:
    """The action's description, with the server's `/metadata` description once: not when it is
    openenv's placeholder or already said (an action docstring often repeats it)."""
    if not description or _PLACEHOLDER_DESCRIPTION.match(description):
        return summary
    if description.lower() in summary.lower():
        return summary
    if summary.lower().rstrip(".") in description.lower():
        return description
    return f"{summary} {description}"


def error_details(errors: Any) -> str:
    """A server's validation errors (pydantic's `errors()`: loc, msg) as one line."""
    if not isinstance(errors, list):
        return ""
    parts = []
    for error in errors[:MAX_ERROR_DETAILS]:
        if not isinstance(error, dict):
            continue
        loc = error.get("loc")
        where = ".".join(str(p) for p in loc) if isinstance(loc, list | tuple) else str(loc or "")
        message = str(error.get("msg") or "invalid")
        parts.append(f"{where}: {message}" if where else message)
    if len(errors) > MAX_ERROR_DETAILS:
        parts.append(f"and {len(errors) - MAX_ERROR_DETAILS} more")
    return " ".join("; ".join(parts).split())[:2000]


def _reset_refusal(env_name: str, options: Mapping[str, Any], error: str) -> str:
    said = error.removeprefix(SERVER_ERROR_PREFIX)
    shown = ", ".join(f"{key}={value!r}" for key, value in options.items()) or "no options"
    return f"environment '{env_name}' refused the reset ({shown[:1000]}): {said}"


def _adapter_type(
    class_name: str,
    base_url: str,
    env_name: str,
    reset_keys: Sequence[str] | None,
    methods: Mapping[str, Callable[..., str]],
) -> type[OpenEnvAdapter]:
    if reset_keys is not None and (
        isinstance(reset_keys, str) or not all(isinstance(key, str) for key in reset_keys)
    ):
        raise ValueError("reset_keys must be a sequence of dataset-row keys")
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": class_name,
        "__doc__": f"TRL adapter generated for the OpenEnv environment {env_name!r} at {base_url}.",
        "base_url": http_base(base_url),
        "env_name": env_name,
        "_reset_keys": None if reset_keys is None else tuple(reset_keys),
        **methods,
    }
    return type(class_name, (_GenericAdapter,), namespace)



def _mcp_call(
    tool_name: str, wire_names: Mapping[str, str]
) -> Callable[[Any, dict[str, Any]], str]:
    # The tool method's body (typed_tools.make_tool): self is the adapter it is called on.
    def call(self: _GenericAdapter, arguments: dict[str, Any]) -> str:
        action = {
            "type": "call_tool",
            "tool_name": tool_name,
            "arguments": {wire_names[name]: value for name, value in arguments.items()},
        }
        result = self._step(action)
        self._check_episode(result)
        text, failed = _tool_result_text(result.observation.fields)
        if failed:
            self.tool_failures += 1
            raise toolstats.tag(
                RuntimeError(text or f"{tool_name} failed"), _tool_error_class(result.observation.fields)
            )
        if result.done:  # tell the model to stop; the reward when the server gave one
            reward = "" if result.reward is None else f"\nreward: {result.reward}"
            text = f"{text}{reward}\ndone: true"
        return text

    return call


# --- JSON schema -> Python signature --------------------------------------------------------





def _is_mcp_action(action: Mapping[str, Any]) -> bool:
    properties = action.get("properties") or {}
    discriminator = properties.get("type") if isinstance(properties, Mapping) else None
    kinds = set()
    if isinstance(discriminator, Mapping):
        kinds = {discriminator.get("const"), *(discriminator.get("enum") or ())}
    return (
        action.get("title") in MCP_ACTION_TITLES
        or bool(kinds & MCP_ACTION_TYPES)
        or ("tool_name" in properties and "arguments" in properties)
    )


def _input_schema(tool: Mapping[str, Any]) -> Any:
    schema = tool.get("inputSchema", tool.get("input_schema"))
    return {} if schema is None else schema


def _action_fields(action: Mapping[str, Any]) -> dict[str, Any]:
    properties = action.get("properties") or {}
    return (
        {k: v for k, v in properties.items() if k != "metadata"}
        if isinstance(properties, Mapping)
        else {}
    )


# --- text -----------------------------------------------------------------------------------


def _render_fields(fields: Mapping[str, Any]) -> list[str]:
    lines = []
    for key, value in fields.items():
        if value is None:
            continue
        text = value if isinstance(value, str) and value else _compact(value)
        lines.append(f"{key}: {text}")
    return lines


def _tool_result_text(fields: Mapping[str, Any]) -> tuple[str, bool]:
    """The text of a ``CallToolObservation`` and whether it reports a failure."""
    error = fields.get("error")
    if error:
        return (str(error.get("message")) if isinstance(error, dict) else str(error)), True
    result = fields.get("result")
    if (
        not isinstance(result, dict)
        or not {"content", "data", "structured_content"} & result.keys()
    ):
        return (
            "" if result is None else result if isinstance(result, str) else _compact(result)
        ), False
    failed = bool(result.get("is_error") or result.get("isError"))
    content = result.get("content")
    blocks: list[Any] = content if isinstance(content, list) else []
    texts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
    if texts:
        return "\n".join(texts), failed
    for key in ("data", "structured_content", "structuredContent"):
        if result.get(key) is not None:
            value = result[key]
            return (value if isinstance(value, str) else _compact(value)), failed
    return "", failed


def _tool_error_class(fields: Mapping[str, Any]) -> str:
    """A failed ``CallToolObservation``'s class: the server's own ``error.error_type``
    (OpenEnv's MCP taxonomy) where it names one; a tool's ``is_error`` result ran and failed."""
    error = fields.get("error")
    kind = error.get("error_type") if isinstance(error, dict) else None
    return str(kind) if kind in ERROR_CLASSES and kind != UNKNOWN_TOOL else EXECUTION_ERROR




def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)



def _method_names(raw_names: Sequence[str]) -> list[str]:
    """Method names for tools: valid public names stay; the others are mended around them."""

    def usable(raw: str) -> bool:
        return raw == identifier(raw, fallback="tool") and raw not in _TAKEN_NAMES

    taken = {raw for raw in raw_names if usable(raw)}
    names: list[str] = []
    for raw in raw_names:
        if usable(raw) and raw not in names:
            names.append(raw)
            continue
        name = identifier(raw, fallback="tool")
        name = f"{name}_tool" if name in _TAKEN_NAMES else name
        names.append(unique(name, taken | set(names)))
    return names



def _snake(text: str) -> str:
    return identifier(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text), fallback="").lower()


def _camel(text: str) -> str:
    return "".join(part.capitalize() for part in _snake(text).split("_")) or "OpenEnv"


# --- HTTP -----------------------------------------------------------------------------------


def http_base(base_url: str) -> str:
    parts = urllib.parse.urlsplit(str(base_url).strip())
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    if scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"base_url must be an http(s) URL like http://127.0.0.1:8000, got {base_url!r}"
        )
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def request_json(url: str, *, body: Any = None, timeout: float) -> Any:
    """One JSON request through the lab's outbound guard: checked addresses, no proxy, no
    redirect followed (a 3xx is an error), no body read past ENVLAB_MAX_RESPONSE_BYTES."""
    method = "GET" if body is None else "POST"
    url = netguard.check_outbound_url(url)  # OutboundRefused is a ValueError
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Accept": "application/json", "Content-Type": "application/json"},
        method=method,
    )
    try:
        with netguard.opener().open(request, timeout=timeout) as response:
            raw = netguard.read_capped(response)
    except urllib.error.HTTPError as exc:
        exc.close()
        if 300 <= exc.code < 400:
            raise ValueError(
                f"{method} {url} answered a redirect (HTTP {exc.code}), which is not followed"
            ) from None
        raise ValueError(
            f"{method} {url} answered HTTP {exc.code}; is this an OpenEnv environment server?"
        ) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:  # refused, timed out
        reason = getattr(exc, "reason", exc)
        raise ConnectionError(f"cannot reach {url}: {reason}") from None
    except ValueError as exc:  # too large, or an address refused at connect time
        raise ValueError(f"{method} {url}: {exc}") from None
    try:
        return json.loads(raw)
    except ValueError:
        raise ValueError(
            f"{method} {url} did not answer JSON; is this an OpenEnv environment server?"
        ) from None
