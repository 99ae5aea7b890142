"""Policies that play an environment through its tools: a solver per bundled environment and
a random valid policy for any environment whose tools are typed.

A policy sees exactly what a model would see, never the server's internals, so an episode it
plays is a valid demonstration (SFT warm-up), a reference score (evaluations) or a dry run:

- ``start(prompt, row)``: the user turn the model gets (the row's prompt with the text
  ``reset`` returned appended, as TRL builds it) and the dataset row (only for what the
  prompt itself states, e.g. the echo target).
- ``next_call(last_result)``: the next tool call given the text of the last tool result
  (``None`` before the first call), or ``None`` when the episode is over for the policy.
- ``final_text``: what the assistant says after its last call (the turn that ends a TRL
  rollout without a tool call).

Nothing here imports openenv, the worker or the web app: the solvers are plain Python and the
episode player (worker/episodes.py) drives them through the training adapters.
"""

from __future__ import annotations

import importlib
import random
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from envs.registry import SpecTable

RANDOM = "random"
SOLVER = "solver"

# Bundled environment key -> the solver class, by dotted path (imported on first use): each
# environment's lab spec (envs/<key>/lab.py) names its own.
SOLVERS: Mapping[str, str] = SpecTable(lambda spec: spec.solver)


@dataclass(frozen=True)
class ToolCall:
    """One tool call: the tool's name and its keyword arguments (JSON values)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


class Policy(Protocol):
    final_text: str

    def start(self, prompt: str, row: Mapping[str, Any]) -> None: ...

    def next_call(self, last_result: str | None) -> ToolCall | None: ...


def solver_class(key: str) -> type[Any] | None:
    """The solver of a bundled environment (``"echo"``, ``"wordle"``...), else None."""
    dotted = SOLVERS.get(key)
    if dotted is None:
        return None
    module_name, _, class_name = dotted.rpartition(".")
    return getattr(importlib.import_module(module_name), class_name)


def policy_for(
    key: str, *, tools: Sequence[Mapping[str, Any]], seed: int = 0, kind: str = SOLVER
) -> Policy:
    """The policy for an environment: its solver when ``kind`` is ``"solver"`` and ``key``
    names a bundled environment that has one, else the random valid policy over ``tools``
    (TRL's tool JSON schemas, see ``RandomPolicy``).

    Raises:
        ValueError: ``kind`` is neither ``"solver"`` nor ``"random"``.
    """
    if kind not in (SOLVER, RANDOM):
        raise ValueError(f"policy kind must be '{SOLVER}' or '{RANDOM}', got {kind!r}")
    cls = solver_class(key) if kind == SOLVER else None
    if cls is not None:
        return cls()
    return RandomPolicy(tools, seed=seed)


# --- the random valid policy ------------------------------------------------------------

# Bounds used where a schema gives none: small values are what tools take (a row, a count, a
# digit); a random policy that sends 10**9 tells nobody anything.
DEFAULT_INT_RANGE = (1, 9)
DEFAULT_NUMBER_RANGE = (0.0, 10.0)
DEFAULT_STRING_LENGTH = (1, 8)
MAX_ARRAY_ITEMS = 3
MAX_SCHEMA_DEPTH = 6


class RandomPolicy:
    """Picks a tool and arguments valid under the tool's JSON schema, from a seeded RNG.

    ``tools``: JSON schemas in the form TRL renders for the chat template,
    ``{"type": "function", "function": {"name", "description", "parameters"}}`` (or the
    bare ``function`` part). ``parameters`` may use ``type`` (a name or a list of names),
    ``enum``, ``anyOf``/``oneOf``, ``minimum``/``maximum`` (and their exclusive forms),
    ``minLength``/``maxLength``, ``items`` and ``minItems``/``maxItems``; a required
    argument is always sent, an optional one half of the time. It never stops by itself:
    the episode player ends the episode when the environment does (or at its call limit).
    """

    final_text = "Done."

    def __init__(self, tools: Sequence[Mapping[str, Any]], *, seed: int = 0) -> None:
        self.tools = [_function_part(tool) for tool in tools]
        if not self.tools:
            raise ValueError("a random policy needs at least one tool")
        self._rng = random.Random(seed)

    def start(self, prompt: str, row: Mapping[str, Any]) -> None:
        """Nothing to read: a random policy ignores what it is told."""

    def next_call(self, last_result: str | None) -> ToolCall:
        tool = self._rng.choice(self.tools)
        parameters = tool.get("parameters") or {}
        properties: Mapping[str, Any] = parameters.get("properties") or {}
        required = set(parameters.get("required") or ())
        arguments = {
            name: random_value(schema, self._rng)
            for name, schema in properties.items()
            if name in required or self._rng.random() < 0.5
        }
        return ToolCall(tool["name"], arguments)


def _function_part(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    function = tool.get("function") if tool.get("type") == "function" else tool
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ValueError(f"a tool schema needs a name: {tool!r:.200}")
    parameters = function.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise ValueError(f"tool {function['name']!r}: parameters must be a JSON schema object")
    return function


def random_value(schema: Mapping[str, Any], rng: random.Random, depth: int = 0) -> Any:
    """A value valid under ``schema`` (the subset described on ``RandomPolicy``)."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        usable = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
        return random_value(rng.choice(usable), rng, depth + 1) if usable else None
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"] or ["null"]
        kind = rng.choice(kinds)
    if kind == "integer":
        low, high = _bounds(schema, DEFAULT_INT_RANGE, integer=True)
        return rng.randint(int(low), int(high))
    if kind == "number":
        low, high = _bounds(schema, DEFAULT_NUMBER_RANGE, integer=False)
        return round(rng.uniform(low, high), 3) if low < high else low
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "array":
        low = int(schema.get("minItems", 0))
        high = max(low, min(int(schema.get("maxItems", MAX_ARRAY_ITEMS)), low + MAX_ARRAY_ITEMS))
        declared = schema.get("items")
        items: Mapping[str, Any] = declared if isinstance(declared, Mapping) else {"type": "string"}
        if depth >= MAX_SCHEMA_DEPTH:
            return []
        return [random_value(items, rng, depth + 1) for _ in range(rng.randint(low, high))]
    if kind == "object":
        return {}
    return _random_string(schema, rng)  # "string", or untyped: text is what any tool takes


def _bounds(
    schema: Mapping[str, Any], default: tuple[float, float], *, integer: bool
) -> tuple[float, float]:
    step = 1 if integer else 1e-6
    low: float | None = schema.get("minimum")
    if low is None and schema.get("exclusiveMinimum") is not None:
        low = schema["exclusiveMinimum"] + step
    high: float | None = schema.get("maximum")
    if high is None and schema.get("exclusiveMaximum") is not None:
        high = schema["exclusiveMaximum"] - step
    if low is None:
        if high is None:
            return default
        low = min(default[0], high)
    elif high is None:
        high = max(default[1], low)
    if integer:
        low, high = -(-low // 1), high // 1  # ceil / floor: whole numbers inside the bounds
    if low > high:
        raise ValueError(f"no value satisfies {dict(schema)!r:.200}")
    return low, high


def _random_string(schema: Mapping[str, Any], rng: random.Random) -> str:
    low = int(schema.get("minLength", DEFAULT_STRING_LENGTH[0]))
    high = int(schema.get("maxLength", max(low, DEFAULT_STRING_LENGTH[1])))
    high = max(low, min(high, low + DEFAULT_STRING_LENGTH[1]))
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(low, high)))
