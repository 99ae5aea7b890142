"""The echo environment as the lab knows it (envs/spec.py)."""

from envs.spec import AdapterSpec, BundledSpec, openenv_server

LAB = BundledSpec(
    **openenv_server("echo", "Echo", 8101),
    adapter=AdapterSpec("echo", "envs.adapters.echo.EchoAdapter", ("echo",), "EchoAction", ("message",)),
    solver="envs.echo.solver.EchoSolver",
    prompt="Echo '{phrase}'.",
)
