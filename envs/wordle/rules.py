"""Wordle's marking rule, shared by the bundled server and its solver (no openenv import)."""

from __future__ import annotations

from collections import Counter

RIGHT_PLACE, ELSEWHERE, ABSENT = "G", "Y", "X"


def score_guess(guess: str, secret: str) -> str:
    """Marks for ``guess`` against ``secret``, one per letter: G, Y or X.

    Like real Wordle, a letter repeated in the guess is marked G or Y only as many times
    as it occurs in the secret, greens first, then yellows from left to right.
    """
    if len(guess) != len(secret):
        raise ValueError(f"guess and secret differ in length: {guess!r}, {secret!r}")
    marks = [ABSENT] * len(guess)
    unmatched: Counter[str] = Counter()
    for i, (g, s) in enumerate(zip(guess, secret, strict=True)):
        if g == s:
            marks[i] = RIGHT_PLACE
        else:
            unmatched[s] += 1
    for i, g in enumerate(guess):
        if marks[i] != RIGHT_PLACE and unmatched[g] > 0:
            marks[i] = ELSEWHERE
            unmatched[g] -= 1
    return "".join(marks)
