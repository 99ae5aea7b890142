"""The bundled Open Reward Standard server as the lab knows it (envs/spec.py): trained
through the ORS adapter (envs/adapters/ors.py), so no adapter of its own."""

import sys

from envs.spec import HOST, BundledSpec


def command(port: int) -> list[str]:
    return [sys.executable, "-m", "envs.ors.server", "--host", HOST, "--port", str(port)]


# The ORS server does not read MAX_CONCURRENT_ENVS; its capacity is a declared budget.
LAB = BundledSpec(
    key="ors",
    title="Open Reward Standard (echo, guessnumber)",
    kind="ors",
    marker="envs.ors.server",
    default_capacity=64,
    default_port=8106,
    command=command,
)
