"""Tally: a sixth environment that lives outside envs/, registered from its folder alone
(`envs.registry.register_folder`) to show that one `lab.py` is all the lab needs. The agent
adds 1, 2 or 3 at a time and must land exactly on the target."""
