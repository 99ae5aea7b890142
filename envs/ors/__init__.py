"""Open Reward Standard environments bundled with envlab: ``echo`` and ``guessnumber``.

The server lives in ``envs.ors.server`` (imports FastAPI and the openreward server
SDK); the seeded task lists in ``envs.ors.tasks`` import nothing heavy. Training talks
to these servers through ``envs.adapters.ors``.
"""
