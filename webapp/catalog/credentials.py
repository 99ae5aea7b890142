"""Which Open Reward key an ORS environment may use for a user: the web app decides (stored
secrets, the operator's allowed variables); the adapters (envs/adapters) only receive it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from webapp.accounts.secrets import user_secret_value


def ors_credentials(environment: Any, user: Any = None) -> dict[str, str | None]:
    """The Open Reward key arguments for an ORS environment: `api_key` (the user's own stored
    key) and/or `api_key_env` (a variable the operator allowed).

    Keys go only to the configured Open Reward host, for environments registered from its
    catalog: any other server (a `base_url` a user typed) gets no key, whatever its row says.
    """
    metadata: Mapping[str, Any] = environment.metadata or {}
    catalog_host = str(settings.ENVLAB_OPENREWARD_API_URL).rstrip("/")
    if not metadata.get("ors_catalog") or str(environment.base_url).rstrip("/") != catalog_host:
        return {"api_key": None, "api_key_env": None}
    variable = metadata.get("api_key_env") or None
    if variable not in settings.ENVLAB_API_KEY_ENV_ALLOWED:
        variable = None
    own = user_secret_value(user=user, name="openreward_api_key")
    return {"api_key": own, "api_key_env": None if own else variable}
