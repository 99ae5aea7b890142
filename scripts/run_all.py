"""`make run`: the web server, a training worker, a light worker with the embedded beat
scheduler, and the bundled environment servers, on the embedded defaults; Ctrl-C stops them
all. The same as `envlab-server run` from an installed wheel (webapp/server.py, which says
what each process is). Logs go to var/log/ (servers: var/log/envs/). ENVLAB_PORT,
ENVLAB_DEMO_USER and ENVLAB_DEMO_PASSWORD choose the port and the demo login."""

from __future__ import annotations

import sys

from webapp.server import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
