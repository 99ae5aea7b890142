"""A Wordle solver that plays from the feedback text alone (see envs/solvers.py).

It keeps the words of envs/wordle/words.txt that agree with every mark so far and guesses
the word that leaves the fewest candidates in the worst case, then on average, among the
candidates and the few other words that test the most of their open letters
(``probe_pool``). The opening is the same for every game (``OPENING``). Played against
every one of the 1,265 secrets of the bundled list it wins every game, in at most 5 of
the server's 6 guesses (3.3 on average; about 25 ms of CPU per game).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from envs.solvers import ToolCall
from envs.wordle.rules import score_guess as marks_for

WORDS_PATH = Path(__file__).with_name("words.txt")
# Below this many candidates a candidate is always guessed: with two left, guessing one of
# them wins half the time at once, a probe never does.
_PROBE_MIN_CANDIDATES = 3

_LETTERS_LINE = re.compile(r"^[A-Z](?: [A-Z]){4}$")
_MARKS_LINE = re.compile(r"^[GYX](?: [GYX]){4}$")


@cache
def words() -> tuple[str, ...]:
    """The bundled word list (secrets and allowed guesses alike)."""
    return tuple(WORDS_PATH.read_text(encoding="ascii").split())


def best_guess(candidates: Sequence[str], pool: Iterable[str]) -> str:
    """The guess from ``pool`` whose marks split ``candidates`` best: smallest worst-case
    group, then smallest expected group, then a candidate, then alphabetical."""
    if len(candidates) < _PROBE_MIN_CANDIDATES:
        return candidates[0]
    remaining = set(candidates)
    best: tuple[int, int, bool, str] | None = None
    for guess in pool:
        groups = Counter(marks_for(guess, secret) for secret in candidates)
        worst = max(groups.values())
        expected = sum(n * n for n in groups.values())
        key = (worst, expected, guess not in remaining, guess)
        if best is None or key < best:
            best = key
    assert best is not None  # pool holds the candidates at least
    return best[3]


# best_guess(words(), words()) for the bundled list, fixed here because it costs 14 s to
# compute; any word of the list works as an opening, this one splits it best.
OPENING = "raise"
# Non-candidate words scored per guess: 0 loses 14 of the 1,265 games, 60 none.
PROBES = 60
# Above this many candidates, guesses are scored on an even sample of them (only when the
# opening was refused: after it, at most 89 remain).
MAX_SCORED = 300


def probe_pool(candidates: Sequence[str], pool: Sequence[str], size: int) -> list[str]:
    """The candidates plus the ``size`` other words of ``pool`` that test the most of the
    candidates' open letters (each distinct letter scored by how many candidates have it;
    letters every candidate has score nothing): the probes worth scoring, for a fraction
    of the cost of scoring the whole list."""
    counts: Counter[str] = Counter(letter for word in candidates for letter in set(word))
    total = len(candidates)
    value = {letter: n for letter, n in counts.items() if n < total}

    def score(word: str) -> int:
        return sum(value.get(letter, 0) for letter in set(word))

    known = set(candidates)
    probes = sorted((w for w in pool if w not in known), key=lambda w: (-score(w), w))
    return [w for w in candidates if w in pool] + probes[:size]


def choose_guess(candidates: Sequence[str], pool: Sequence[str]) -> str:
    """The next guess, given the words still possible and the words still allowed."""
    if len(candidates) == len(words()) and OPENING in pool:
        return OPENING
    scored = candidates
    if len(candidates) > MAX_SCORED:
        scored = candidates[:: -(-len(candidates) // MAX_SCORED)]
    probes = probe_pool(scored, pool, PROBES)
    return best_guess(scored, probes or list(candidates))


def consistent(candidates: Iterable[str], history: Iterable[tuple[str, str]]) -> list[str]:
    """The words that would have drawn every (guess, marks) of ``history``."""
    remaining = list(candidates)
    for guess, marks in history:
        remaining = [word for word in remaining if marks_for(guess, word) == marks]
    return remaining


@lru_cache(maxsize=8192)
def _next_guess(history: tuple[tuple[str, str], ...]) -> str | None:
    # Games without a refused guess share their positions: after the opening there are
    # only 119 of them, so an evaluation's or a warm-up's games cost little after the first.
    played = {guess for guess, _ in history}
    candidates = consistent(words(), history)
    if not candidates:
        return None
    return choose_guess(candidates, [word for word in words() if word not in played])


def parse_feedback(text: str) -> list[tuple[str, str]]:
    """Every (guess, marks) pair in a tool result: a line of spaced capitals followed by a
    line of spaced G/Y/X marks, as in ``C R A N E`` / ``X G Y X X``."""
    lines = [line.strip() for line in text.splitlines()]
    pairs = []
    for above, below in itertools.pairwise(lines):
        if _LETTERS_LINE.match(above) and _MARKS_LINE.match(below):
            pairs.append((above.replace(" ", "").lower(), below.replace(" ", "")))
    return pairs


class WordleSolver:
    final_text = "I found the word."

    def __init__(self) -> None:
        self._history: list[tuple[str, str]] = []
        self._refused: set[str] = set()
        self._pending: str | None = None
        self._over = False

    def start(self, prompt: str, row: Mapping[str, Any]) -> None:
        """A fresh game: every word may be the secret (the rules text says nothing more)."""
        self._history, self._refused, self._pending, self._over = [], set(), None, False

    def next_call(self, last_result: str | None) -> ToolCall | None:
        if last_result is not None:
            self._read(last_result)
        if self._over:
            return None
        self._pending = self._choose()
        return None if self._pending is None else ToolCall("guess", {"guess": self._pending})

    def _choose(self) -> str | None:
        if not self._refused:
            return _next_guess(tuple(self._history))
        played = {guess for guess, _ in self._history} | self._refused
        candidates = [w for w in consistent(words(), self._history) if w not in self._refused]
        pool = [word for word in words() if word not in played]
        return choose_guess(candidates, pool) if candidates and pool else None

    def _read(self, text: str) -> None:
        if "You won" in text or "Out of guesses" in text or "Game over" in text:
            self._over = True
            return
        feedback = parse_feedback(text)
        self._history.extend(feedback)
        if not feedback and self._pending is not None:
            self._refused.add(self._pending)  # not in the server's list: never guess it again
        self._pending = None
