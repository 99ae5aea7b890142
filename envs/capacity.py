"""A server's session limit in words a user can act on. The launch check
(webapp.runs.services) and a refusal in the middle of a run (envs.adapters.base) give the
same advice, and only advice that can work: upstream OpenEnv servers do not read
MAX_CONCURRENT_ENVS (only the bundled ones do), and GRPO's generation batch cannot go
below num_generations, which is at least 2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envs.registry import ADAPTERS, BUNDLED, recorded_adapter

# GRPO compares completions of one prompt: fewer than two give no advantage (RunConfig's floor).
MIN_NUM_GENERATIONS = 2

# How openenv 0.10 words a refusal (SessionCapacityError), relayed by its client as
# "Server error: Server at capacity: 1/1 sessions active. Cannot accept new connections.
# (code: CAPACITY_REACHED)"; the JSON-RPC paths also send `max_sessions` as data.
_ACTIVE_OF_MAX = re.compile(r"(\d+)\s*/\s*(\d+)\s+sessions?\s+active", re.IGNORECASE)
_MAX_SESSIONS = re.compile(r"""["']?max_sessions["']?\s*[:=]\s*(\d+)""")


def sessions(count: int | None) -> str:
    """'1 concurrent session', '8 concurrent sessions', or an unknown number of them."""
    if count is None:
        return "an unknown number of concurrent sessions"
    return f"{count} concurrent session{'' if count == 1 else 's'}"


def refused_capacity(text: str) -> int | None:
    """The session limit a server stated in its CAPACITY_REACHED refusal, or None when its
    text does not say (a server with its own wording)."""
    found = _ACTIVE_OF_MAX.search(text)
    if found:
        return int(found.group(2))
    found = _MAX_SESSIONS.search(text)
    return int(found.group(1)) if found else None


def row_reads_max_concurrent_envs(*, kind: str, metadata: Mapping[str, Any] | None) -> bool:
    """Whether a catalog row is one of the bundled OpenEnv servers, which read
    MAX_CONCURRENT_ENVS (envs/common.py): registration found the bundled server itself
    (`recorded_adapter`), or `envlab_setup` registered it (`metadata["bundled"]`)."""
    metadata = metadata or {}
    if kind != "openenv":
        return False
    if recorded_adapter(metadata) is not None:
        return True
    key = metadata.get("bundled")
    spec = BUNDLED.get(key) if isinstance(key, str) else None
    return spec is not None and spec.kind == "openenv"


def adapter_reads_max_concurrent_envs(cls: type[Any]) -> bool:
    """The same for an adapter class: the worker binds a bundled server's own adapter exactly
    when the row is that bundled server (envs.adapters.base_adapter)."""
    written = {spec.adapter_path for spec in ADAPTERS.values()}
    return any(f"{klass.__module__}.{klass.__qualname__}" in written for klass in cls.__mro__)


def more_sessions_advice(*, reads_max_concurrent_envs: bool) -> str:
    """How to make the server itself take more sessions; the catalog row keeps its old
    capacity until it is measured again."""
    if reads_max_concurrent_envs:
        return "restart the server with a larger MAX_CONCURRENT_ENVS, then measure its capacity again"
    # openenv's create_app serves one session unless both are set, whatever the environment says.
    return (
        "make the server take more: mark its environment class concurrency-safe "
        "(SUPPORTS_CONCURRENT_SESSIONS = True) and pass max_concurrent_envs to create_app, "
        "then measure its capacity again"
    )


def batch_advice(*, capacity: int, num_generations: int | None = None, processes: int = 1) -> tuple[str, bool]:
    """How to shrink the generation batch to fit `capacity` sessions, and whether it can;
    where it cannot, the sentence says what the smallest batch is. `num_generations`: the
    run's (an adapter does not know it: then only its floor is said). `processes`: training
    processes, each with a batch of its own on the same server."""
    product = "per_device_train_batch_size x gradient_accumulation_steps"
    processes = max(processes, 1)
    per_process = capacity // processes
    each = f", for each of the {processes} processes sharing the server" if processes > 1 else ""
    if per_process < MIN_NUM_GENERATIONS:
        if capacity >= MIN_NUM_GENERATIONS:
            return (
                f"train with fewer processes: each of the {processes} needs at least {MIN_NUM_GENERATIONS} "
                f"sessions (num_generations is at least {MIN_NUM_GENERATIONS})"
            ), True
        return (
            f"a smaller batch cannot fit: num_generations is at least {MIN_NUM_GENERATIONS}, so the smallest "
            f"generation batch is {MIN_NUM_GENERATIONS} rollouts"
        ), False
    if num_generations is None:
        return f"lower {product} to {per_process} or less (a multiple of num_generations){each}", True
    if per_process >= num_generations:
        fitting = per_process // num_generations * num_generations
        return f"lower {product} to {fitting} (a multiple of num_generations, {num_generations}){each}", True
    return (
        f"lower num_generations and {product} to {per_process} (with num_generations {num_generations} "
        f"the smallest generation batch is {num_generations * processes} rollouts){each}"
    ), True


def shortfall_advice(
    *, capacity: int | None, num_generations: int | None = None, processes: int = 1,
    reads_max_concurrent_envs: bool,
) -> str:
    """Every fix that can work when a server takes fewer sessions than the generation batch."""
    server = more_sessions_advice(reads_max_concurrent_envs=reads_max_concurrent_envs)
    if capacity is None:
        return f"lower per_device_train_batch_size x gradient_accumulation_steps, or {server}"
    batch, possible = batch_advice(capacity=capacity, num_generations=num_generations, processes=processes)
    return f"{batch}, or {server}" if possible else f"{batch}; {server}"
