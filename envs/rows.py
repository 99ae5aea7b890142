"""What a dataset row holds: envlab's own columns, and the environment's reset options.

Every episode starts from one row (TRL calls `reset(**row)`). envlab fills a few columns
itself; every other column came from a run's, an evaluation's, a dry run's or the console's
`reset` and is the environment's own reset option, sent to the server as it is. A
multi-environment run gives every row every column (None where it does not apply), so None
never reaches a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Columns envlab sets: the prompt, the run-local environment (`env`; `environment` is TRL's
# multi-environment field), the target phrase of a prompt, and an ORS task's index. `seed` is
# envlab's too, but it is also every OpenEnv server's own reset argument: it is sent.
ENVLAB_COLUMNS = frozenset({"prompt", "env", "environment", "target", "task_index"})
SEED = "seed"
# Keys a `reset` in a request may not set: envlab sets them itself.
RESERVED_RESET_KEYS = ENVLAB_COLUMNS | {SEED}


def reset_options(row: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a server's `reset` for `row`: its seed and every reset option."""
    return {key: value for key, value in row.items() if key not in ENVLAB_COLUMNS and value is not None}
