"""The one way a process gets the adapter of a registered environment: the catalog row, its
adapter bound to its server (envs.adapters.bind_adapter) and the Open Reward key its user
may use (webapp.catalog.credentials). The worker (training, warm-up, evaluations, dry runs,
learnability, previews) and the web app's try-it console all bind through here, so an
environment is never trained on with one adapter and tried with another.

It lives in the web app, not the worker, because the console binds too and webapp code never
imports the worker; envs.adapters is imported on call, as it may import openenv.
"""

from __future__ import annotations

from typing import Any

from webapp.catalog.credentials import ors_credentials
from webapp.catalog.models import Environment


def environment_adapter(
    environment: Environment | int,
    *,
    owner: Any,
    env_name: str | None = None,
    batch_size: int | None = None,
) -> type[Any]:
    """The no-argument-constructible adapter class TRL's `environment_factory` gets for
    `environment` (a row, or its id: the row is read fresh), bound under `env_name` (the
    run-local name; the catalog name by default). `owner`: the user whose stored Open Reward
    key an ORS environment may use (None: only an operator-allowed variable).

    Raises Environment.DoesNotExist for an id with no row, and what `bind_adapter` raises
    (ValueError for a kind GRPO cannot train on, ConnectionError for a server that does not
    answer where the adapter must be generated from it).
    """
    from envs.adapters import bind_adapter

    row = environment if isinstance(environment, Environment) else Environment.objects.get(pk=environment)
    return bind_adapter(
        environment=row,
        env_name=row.name if env_name is None else env_name,
        batch_size=batch_size,
        credentials=ors_credentials(row, owner),
    )
