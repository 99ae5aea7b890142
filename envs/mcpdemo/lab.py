"""The MCP demo environment as the lab knows it (envs/spec.py): no adapter of its own (the
worker generates one from its `tools/list`), no solver, no default prompt."""

from envs.spec import BundledSpec, openenv_server

LAB = BundledSpec(**openenv_server("mcpdemo", "MCP demo", 8105))
