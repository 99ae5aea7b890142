"""Fixtures of the adapter tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from envs.adapters.base import OpenEnvAdapter


@pytest.fixture
def opened() -> Iterator[Callable[[type[OpenEnvAdapter]], Any]]:
    """Instantiate adapters and close their sessions when the test ends."""
    adapters: list[OpenEnvAdapter] = []

    def make(cls: type[OpenEnvAdapter]) -> Any:
        adapters.append(cls())
        return adapters[-1]

    yield make
    for adapter in adapters:
        adapter._close()
