"""mcpdemo: a tiny MCP-style OpenEnv environment (tools, not a typed action).

The agent builds a shopping list with the MCP tools ``add_item(name, quantity)`` and
``total()``; with a target (from the reset seed, or given explicitly) a ``total()`` that
equals it scores 1.0 and ends the episode. The server lives in ``envs.mcpdemo.server``
(it imports FastAPI and FastMCP); clients need nothing from this package: any OpenEnv
client that speaks ``ListToolsAction`` / ``CallToolAction`` works, for example
``envs.adapters.generic.mcp_adapter_class``.
"""
