"""The environment kinds (webapp/catalog/kinds/, and envs/adapters/kinds/ for what envs know of
each): one module per kind the catalog can store, and the decisions the launch checks,
evaluations, registration and adapter binding read from it."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from envs.adapters import base_adapter, episode_reward_rule
from envs.adapters.kinds import harbor as harbor_rows
from webapp.catalog.kinds import KINDS, environment_kind, kind_names
from webapp.catalog.models import Environment


def test_every_kind_the_catalog_stores_is_described_once():
    assert set(KINDS) == set(Environment.Kind.values)
    assert {kind.label for kind in KINDS.values()} == {label for _, label in Environment.Kind.choices}
    assert environment_kind("container") is None and environment_kind("") is None
    assert kind_names() == "openenv, ors or harbor"


def test_what_each_kind_is_to_the_lab():
    described = {k.name: (k.trains_in, k.evaluable, k.capacity_measurable, k.tasks_from_server) for k in KINDS.values()}
    assert described == {
        "openenv": ("grpo", True, True, False),
        "ors": ("grpo", False, False, True),
        "harbor": ("harness", False, True, False),
    }


def test_each_kind_checks_what_a_run_entry_must_say_for_it():
    row = SimpleNamespace(name="srv", metadata={"splits": {"train": 10, "test": 2}})
    entry = SimpleNamespace(prompt="  ", split="valid")
    assert KINDS["openenv"].entry_errors(row, entry) == {
        "prompt": "give the prompt of each 'srv' episode (only ORS tasks bring their own)"
    }
    assert KINDS["ors"].entry_errors(row, entry) == {"split": "'srv' has splits test, train, not 'valid'"}
    assert KINDS["harbor"].entry_errors(row, entry) == {}
    fine = SimpleNamespace(prompt="Play.", split="train")
    assert all(kind.entry_errors(row, fine) == {} for kind in KINDS.values())
    assert KINDS["ors"].entry_errors(SimpleNamespace(name="srv", metadata={}), entry) == {}  # no splits known


def test_every_kind_has_a_module_in_the_lab_and_in_envs():
    import envs.adapters.kinds as env_kinds
    import webapp.catalog.kinds as lab_kinds

    for name in Environment.Kind.values:
        assert importlib.import_module(f"webapp.catalog.kinds.{name}") is getattr(lab_kinds, name)
        assert importlib.import_module(f"envs.adapters.kinds.{name}") is env_kinds.KINDS[name]
    assert set(env_kinds.KINDS) == set(Environment.Kind.values)


def test_each_kind_module_in_envs_binds_and_rewards_its_rows():
    harbor = SimpleNamespace(kind="harbor", name="h", base_url="http://h", metadata={"harbor": {"tasks": [
        {"index": 0, "dataset": "a"}, {"index": 1, "dataset": "b"}, {"index": 2}, "not a task",
    ]}})
    with pytest.raises(ValueError, match="environments of kind 'harbor' cannot be trained on with GRPO here"):
        base_adapter(harbor)
    with pytest.raises(ValueError, match="environments of kind 'container' cannot be trained on with GRPO here"):
        base_adapter(SimpleNamespace(kind="container", metadata={}))
    assert episode_reward_rule(harbor) == ("verifier", "the verifier's reward for the agent's rollout")
    assert episode_reward_rule(SimpleNamespace(kind="ors", metadata={}))[0] == "last"
    assert episode_reward_rule(SimpleNamespace(kind="openenv", metadata={"style": "classic"}))[0] == "sum"
    assert [t["index"] for t in harbor_rows.task_rows(harbor.metadata, dataset="a")] == [0, 2]
    assert harbor_rows.task_rows(None, dataset="a") == [] and harbor_rows.catalog({"harbor": None}) == {}
