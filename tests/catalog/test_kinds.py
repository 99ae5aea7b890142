"""The environment kinds (webapp/catalog/kinds/): one description per kind the catalog can
store, and the decisions the launch checks, evaluations and registration read from it."""

from __future__ import annotations

from types import SimpleNamespace

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
