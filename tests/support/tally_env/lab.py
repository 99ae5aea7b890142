"""Everything the lab knows about tally, in the one file a plugin environment brings."""

from collections.abc import Mapping, Sequence
from typing import Any

from envs.spec import (
    COMMON_ATTRIBUTES,
    AdapterSpec,
    BundledSpec,
    Column,
    attribute_sum,
    openenv_server,
)

HERE = "tests.support.tally_env"


def overshoots(played: Sequence[Mapping[str, Any]], attributes: Sequence[Mapping[str, float]]) -> int:
    return sum(1 for a in attributes if float(a.get("overshoot", 0.0)) > 0)


def total_overshoot(played: Sequence[Mapping[str, Any]], attributes: Sequence[Mapping[str, float]]) -> int:
    return attribute_sum(attributes, "overshoot")


LAB = BundledSpec(
    **openenv_server("tally", "Tally", 8190, module=f"{HERE}.server", capacity=8),
    adapter=AdapterSpec("tally", f"{HERE}.adapter.TallyAdapter", ("add",), "TallyAction", ("count",)),
    solver=f"{HERE}.solver.TallySolver",
    attributes=(
        ("won", "1 if the tally ended exactly on the target"),
        ("overshoot", "how far past the target the tally ended (0 to 2)"),
        *COMMON_ATTRIBUTES,
    ),
    ranges={"overshoot": (0.0, 2.0)},
    prompt="Bring the tally exactly to the target with the add tool.",
    columns=(
        Column("overshoots", "episodes that went past the target", overshoots),
        Column("total_overshoot", "how far past the target, all episodes", total_overshoot),
    ),
)
