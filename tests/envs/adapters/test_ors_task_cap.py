"""An ORS environment used without num_tasks or indices lists at most MAX_LISTED_TASKS
tasks, however many its server claims (security review M1), against the real ORS server."""

from __future__ import annotations

import pytest

from envs.adapters import ors
from tests.envs.adapters.test_ors_adapter import ors_server
from tests.envs.servers import free_port


def test_the_tasks_listed_without_num_tasks_or_indices_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    # The bundled server has 12 tasks in this split; the cap (10 000) is lowered to below
    # that instead of serving a million tasks, each of which would open a session.
    monkeypatch.setattr(ors, "MAX_LISTED_TASKS", 5)
    with ors_server(free_port()) as url:
        listed = ors.ors_rows(base_url=url, env_name="guessnumber", split="test")
        asked = ors.ors_rows(base_url=url, env_name="guessnumber", split="test", num_tasks=50)
    assert [row["task_index"] for row in listed] == [0, 1, 2, 3, 4]
    assert [row["task_index"] for row in asked] == [0, 1, 2, 3, 4]
