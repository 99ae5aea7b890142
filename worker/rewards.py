"""The one registry of reward terms. Each term compiles to one TRL reward function named
after the term (so it gets its own `rewards/<name>/mean` curve); a term limited to some
environments returns None elsewhere, and an unscored (lost) rollout gets None everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webapp.runs.config import RewardTerm

RewardFunc = Callable[..., list[float | None]]


def _env_reward(env: Any, term: RewardTerm) -> float:
    return float(env.reward)


def _tool_called(env: Any, term: RewardTerm) -> float:
    return 1.0 if env.tool_calls > env.tool_failures else 0.0


TERMS: dict[str, Callable[[Any, RewardTerm], float]] = {
    "env_reward": _env_reward,
    "tool_called": _tool_called,
}


def compile_term(term: RewardTerm) -> RewardFunc:
    score = TERMS[term.kind]
    allowed = set(term.environments) if term.environments else None

    def reward(*, environments: list[Any] | None = None, completions: Any = None, **_: Any) -> list[float | None]:
        out: list[float | None] = []
        for env in environments or []:
            if getattr(env, "lost", False) or (allowed is not None and env.env_name not in allowed):
                out.append(None)
            else:
                out.append(score(env, term))
        return out

    reward.__name__ = term.name
    reward.__qualname__ = term.name
    return reward


def compile_rewards(terms: list[RewardTerm]) -> tuple[list[RewardFunc], list[float]]:
    return [compile_term(t) for t in terms], [float(t.weight) for t in terms]
