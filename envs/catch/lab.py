"""The Catch environment (OpenSpiel's catch) as the lab knows it (envs/spec.py)."""

from envs.spec import COMMON_ATTRIBUTES, AdapterSpec, BundledSpec, Column, openenv_server, summed

LAB = BundledSpec(
    **openenv_server("catch", "Catch", 8103),
    adapter=AdapterSpec(
        "catch", "envs.adapters.catch.CatchAdapter", ("move", "stay"), "CatchAction", ("direction",)
    ),
    solver="envs.catch.solver.CatchSolver",
    attributes=(
        ("won", "1 if the ball was caught"),
        ("catches", "balls caught (0 or 1: one ball per episode)"),
        *COMMON_ATTRIBUTES,
        ("meta_max_steps", "moves before the ball lands (server metadata)"),
    ),
    ranges={"catches": (0.0, 1.0)},
    prompt="Play Catch: move the paddle with the move tool so that it catches the falling ball.",
    columns=(Column("catches", "balls caught, all episodes", summed("catches")),),
    renderer="catch",
)
