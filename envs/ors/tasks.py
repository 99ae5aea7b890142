"""Fixed, seeded task lists for the bundled ORS environments (no SDK import here).

The lists are computed once at import from fixed seeds, so every server process (and a
restarted one) serves the same task at the same index: a dataset row's ``task_index``
stays meaningful across restarts.
"""

from __future__ import annotations

import random

SPLITS = ("train", "test")

ECHO_MAX_CALLS = 4
ECHO_MAX_PHRASE_CHARS = 200
ECHO_TASK_COUNTS = {"train": 32, "test": 8}

GUESS_LOW = 1
GUESS_HIGH = 100
GUESS_MAX_CALLS = 7  # binary search needs at most 7 guesses for 1..100
GUESS_TASK_COUNTS = {"train": 48, "test": 12}

_WORDS = (
    "amber", "bright", "cedar", "copper", "delta", "ember", "falcon", "garden", "harbor",
    "island", "jade", "kettle", "lantern", "maple", "meadow", "nectar", "orbit", "pebble",
    "quartz", "river", "saffron", "silver", "timber", "tulip", "umber", "velvet", "willow",
    "yellow", "zephyr", "autumn", "breeze", "canyon", "dawn", "echo", "forest", "glacier",
)  # fmt: skip


def _echo_phrases(seed: int = 20260101) -> dict[str, list[str]]:
    """Distinct two- or three-word phrases; no phrase is in both splits."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: dict[str, list[str]] = {}
    for split in SPLITS:
        phrases: list[str] = []
        while len(phrases) < ECHO_TASK_COUNTS[split]:
            phrase = " ".join(rng.sample(_WORDS, rng.choice((2, 3))))
            if phrase not in seen:
                seen.add(phrase)
                phrases.append(phrase)
        out[split] = phrases
    return out


def _guess_targets(seed: int = 20260102) -> dict[str, list[int]]:
    rng = random.Random(seed)
    return {
        split: [rng.randint(GUESS_LOW, GUESS_HIGH) for _ in range(GUESS_TASK_COUNTS[split])]
        for split in SPLITS
    }


ECHO_TASKS: dict[str, list[dict[str, str]]] = {
    split: [{"id": f"echo-{split}-{i:03d}", "phrase": phrase} for i, phrase in enumerate(phrases)]
    for split, phrases in _echo_phrases().items()
}

GUESS_TASKS: dict[str, list[dict[str, str | int]]] = {
    split: [{"id": f"guess-{split}-{i:03d}", "target": target} for i, target in enumerate(targets)]
    for split, targets in _guess_targets().items()
}
