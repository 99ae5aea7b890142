"""Open Reward Standard server with the bundled environments (openreward 0.1.167).

Run with ``python -m envs.ors.server --host 127.0.0.1 --port 8080`` (``Server.run``:
uvicorn plus the SDK's logging setup) or ``python -m uvicorn envs.ors.server:app``.
``GET /health`` answers ``{"status": "ok"}``; ``GET /list_environments`` lists
``["echo", "guessnumber"]``. Every other route is ``/{env}/...``; a path without a known
environment prefix is redirected (308) to the first one, ``echo``.

Set ``OPENREWARD_DISABLE_UPDATE_CHECK=1`` on offline machines: ``Server.run`` otherwise
asks the package index for a newer SDK.
"""

from __future__ import annotations

import argparse

from openreward.environments import Server

from envs.ors.environments import Echo, GuessNumber

ENVIRONMENTS = (Echo, GuessNumber)
ENV_NAMES = tuple(env.name().lower() for env in ENVIRONMENTS)

server = Server(list(ENVIRONMENTS))
app = server.app


def main(argv: list[str] | None = None) -> None:
    """Serve the bundled ORS environments (``python -m envs.ors.server --port N``)."""
    parser = argparse.ArgumentParser(
        description="Serve the bundled Open Reward Standard environments."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    server.run(host=args.host, port=args.port)


if __name__ == "__main__":
    main()
