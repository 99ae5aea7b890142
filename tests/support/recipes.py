"""Reward recipes the tests register: their terms as the recipe API takes them."""

from __future__ import annotations

# The Wordle guide: a win (more for fewer guesses), partial credit for greens, a penalty for
# invalid moves.
WORDLE_GUIDE = [
    {"name": "win", "kind": "success_bonus",
     "params": {"speed_bonus": 0.5, "steps": "num_guesses", "max_steps": "max_guesses"}},
    {"name": "greens", "kind": "partial_credit", "params": {"attribute": "best_greens", "scale": 0.1}},
    {"name": "invalid", "kind": "penalty", "params": {"attribute": "invalid_moves", "scale": 0.1}},
]  # fmt: skip
