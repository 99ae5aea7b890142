"""Metric keys the lab itself logs beside TRL's (no Django import: the worker's sink and
benchmarks import this before Django is set up)."""

import hashlib

# MetricPoint.key's column (and MetricTier's, MetricTierMark's).
MAX_METRIC_KEY = 120
_DIGEST = 16

# When each step was logged (epoch seconds), stored as a metric of the step: the run
# page's wall-time axis. Keys starting with "_" are not charts of their own.
WALL_TIME_KEY = "_wall_time"

# TRL's asynchronous GRPO trainer (trl.experimental.async_grpo, 1.16) logs some metrics under
# names of its own; TRL 1.18 renames them to GRPOTrainer's. Both spellings are stored under
# GRPO's (the lab's) name, so the run page's charts, per-term curves and alerts read one key
# whichever trainer logged it.
ASYNC_ALIASES = {
    "rollout/generated_tok_s": "perf/generated_tokens_per_s",
}
# async 1.16: `rewards/<func>` (the mean); GRPOTrainer and 1.18: `rewards/<func>/mean`.
_REWARD_PREFIX = "rewards/"


def canonical_metric_key(key: str) -> str:
    """The name a metric is stored under: GRPOTrainer's for the async trainer's spellings."""
    alias = ASYNC_ALIASES.get(key)
    if alias is not None:
        return alias
    if key.startswith(_REWARD_PREFIX) and key.count("/") == 1 and len(key) > len(_REWARD_PREFIX):
        return f"{key}/mean"
    return key


def stored_metric_key(key: str) -> str:
    """The key a metric is stored under: itself when it fits the column, else its first
    characters, "~" and a digest of the whole name. Never a cut: two long names that share
    their first 120 characters stay two keys (the run's metric_key_shortened event keeps
    the full name)."""
    if len(key) <= MAX_METRIC_KEY:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    return f"{key[: MAX_METRIC_KEY - _DIGEST - 1]}~{digest}"
