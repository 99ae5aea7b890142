"""A run's live notes from its WebSocket, `/ws/runs/<id>/`, with the API token in the
handshake's Authorization header (the lab's sockets take a session cookie or a token).

The socket carries small notes: a `snapshot` on connect, `metrics` (step and values) as each
step is logged, `rollouts`, and `status` / `facts` when the run's state changed. The database
is the truth: after a dropped socket `watch_run` reconnects and the snapshot says where the
run is, so a step missed while away is read over REST by the caller if it needs it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from envlab_client.client import TERMINAL_RUN_STATUSES, Client, EnvlabError

# Close codes the lab sends that mean "do not retry": unauthenticated, forbidden, not found.
FINAL_CLOSE_CODES = {4401: "not signed in (is the token valid?)", 4403: "forbidden", 4404: "no such run"}


def lab_origin(base_url: str) -> str:
    """The lab's own origin: its sockets refuse a handshake without an Origin among the lab's
    hosts (the guard against other sites' pages; a token in a header is no such page)."""
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


def socket_url(base_url: str, run_id: int) -> str:
    parts = urlsplit(base_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    path = parts.path.rstrip("/") + f"/ws/runs/{run_id}/"
    return urlunsplit((scheme, parts.netloc, path, "", ""))


STATE_NOTES = ("snapshot", "status", "facts")


def _final(run: Any) -> dict[str, Any]:
    return {"type": "final", "status": run["status"], "step": run.get("step"), "error": run.get("error")}


def watch_run(
    client: Client, run_id: int, *, reconnects: int = 30, quiet_seconds: float = 20.0
) -> Iterator[dict[str, Any]]:
    """Every note of the run's socket until the run ends: the last one yielded is a note
    whose `status` is succeeded, failed, cancelled or interrupted (a `final` note read over
    REST when the socket missed it)."""
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.sync.client import connect
    from websockets.typing import Origin

    headers = {"Authorization": f"Token {client.token}"} if client.token else {}
    failures = 0
    while True:
        try:
            with connect(
                socket_url(client.url, run_id),
                additional_headers=headers,
                origin=Origin(lab_origin(client.url)),
                open_timeout=30,
            ) as socket:
                failures = 0
                while True:
                    try:
                        message = socket.recv(timeout=quiet_seconds)
                    except TimeoutError:
                        # Notes are best effort: a quiet socket is checked against the database.
                        run = client.run(run_id)
                        if run.get("status") in TERMINAL_RUN_STATUSES:
                            yield _final(run)
                            return
                        continue
                    note = json.loads(message)
                    if not isinstance(note, dict):
                        continue
                    yield note
                    if note.get("type") in STATE_NOTES and note.get("status") in TERMINAL_RUN_STATUSES:
                        return
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd is not None else None
        except (OSError, InvalidStatus, TimeoutError) as exc:
            code = None
            failures += 1
            if failures > reconnects:
                raise EnvlabError(f"cannot open the run's live socket: {exc}") from exc
        if code in FINAL_CLOSE_CODES:
            raise EnvlabError(f"the lab closed the run's live socket: {FINAL_CLOSE_CODES[code]}", status=code)
        # Dropped (a restart, Redis away): the run may have ended meanwhile.
        run = client.run(run_id)
        if run.get("status") in TERMINAL_RUN_STATUSES:
            yield _final(run)
            return
        time.sleep(min(0.5 * 2 ** min(failures, 4), 10))
