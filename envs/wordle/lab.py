"""The Wordle environment as the lab knows it (envs/spec.py)."""

from collections.abc import Mapping, Sequence
from typing import Any

from envs.spec import (
    COMMON_ATTRIBUTES,
    COUNT,
    AdapterSpec,
    BundledSpec,
    Column,
    mean,
    openenv_server,
    summed,
)


def guesses_per_win(played: Sequence[Mapping[str, Any]], attributes: Sequence[Mapping[str, float]]) -> float | None:
    return mean([float(a.get("num_guesses", 0.0)) for e, a in zip(played, attributes, strict=True) if e["won"]])


def best_greens(played: Sequence[Mapping[str, Any]], attributes: Sequence[Mapping[str, float]]) -> float | None:
    return mean([float(a.get("best_greens", 0.0)) for a in attributes])


LAB = BundledSpec(
    **openenv_server("wordle", "Wordle", 8102),
    adapter=AdapterSpec("wordle", "envs.adapters.wordle.WordleAdapter", ("guess",), "WordleAction", ("guess",)),
    solver="envs.wordle.solver.WordleSolver",
    attributes=(
        ("won", "1 if the word was found"),
        ("num_guesses", "valid guesses made (1 to 6)"),
        ("max_guesses", "guesses allowed (6)"),
        ("best_greens", "most letters in the right place in one guess (0 to 5)"),
        ("invalid_moves", "guesses refused (not a five-letter word); they use no try"),
        *COMMON_ATTRIBUTES,
        ("meta_greens", "greens of the last guess (server metadata)"),
    ),
    ranges={
        "num_guesses": (0.0, 6.0), "max_guesses": (6.0, 6.0), "best_greens": (0.0, 5.0),
        "meta_greens": (0.0, 5.0), "invalid_moves": COUNT,
    },
    prompt="Play Wordle: find the secret five-letter word with the guess tool.",
    columns=(
        Column("guesses_per_win", "mean valid guesses in the episodes won", guesses_per_win),
        Column("best_greens", "mean of the most greens one guess got, per episode (0 to 5)", best_greens),
        Column("invalid_guesses", "guesses refused (not a five-letter word), all episodes", summed("invalid_moves")),
    ),
    renderer="wordle",
)
