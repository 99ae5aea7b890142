"""OpenEnv environment servers bundled with envlab."""
